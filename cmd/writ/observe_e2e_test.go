package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/telemetry/otlptest"
)

// TestServeObservability starts the real server with tracing configured
// only by the standard OTEL_* variables, exporting over OTLP/HTTP to a
// local receiver, and checks what an operator sees: /readyz passes its
// checks, /metrics parses and its check counter moves, the exported
// spans carry the trace id of the records, and every log line is JSON.
func TestServeObservability(t *testing.T) {
	ctx := context.Background()
	recv := otlptest.NewReceiver(true)
	defer recv.Close()
	srv := startServerEnv(t, []string{
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_BSP_SCHEDULE_DELAY=50",
	}, "--data", t.TempDir(), "--pack", "../../examples/refund")

	resp, err := http.Get(srv.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready httpapi.ReadyReport
	json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != 200 || ready.Status != "ok" || len(ready.Checks) != 4 {
		t.Errorf("/readyz = %d %+v, want 200 with the store, commits, signing key and pack checks passed", resp.StatusCode, ready)
	}

	scrape := func() float64 {
		t.Helper()
		resp, err := http.Get(srv.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if v := fams["writ_signing_key_valid"].GetMetric(); len(v) != 1 || v[0].GetGauge().GetValue() != 1 {
			t.Errorf("writ_signing_key_valid = %v, want 1", v)
		}
		sum := 0.0
		for _, m := range fams["writ_checks_total"].GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	before := scrape()
	c := httpapi.NewClient(srv.url)
	req := readExample(t, "../../examples/refund/requests/refund-allow.json")
	for i := range req.Evidence {
		fresh := time.Now().Add(-10 * time.Minute)
		req.Evidence[i].ObservedAt = &fresh
	}
	rc, err := c.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := scrape() - before; d != 1 {
		t.Errorf("writ_checks_total moved by %v after one check, want 1", d)
	}
	dashboardQueriesExist(t, srv.url)
	rec, err := c.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	// The batch exporter sends within its schedule delay: poll.
	want := map[string]bool{"POST /v1/check": false, "writ.check": false, "writ.decide": false, "writ.ledger.append": false, "writ.ledger.commit": false}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range recv.Spans() {
			if _, ok := want[s.Name]; ok && s.TraceID == rec.Record.TraceID {
				want[s.Name] = true
			}
		}
		if len(fmtMissing(want)) == 0 {
			break
		}
	}
	if missing := fmtMissing(want); len(missing) > 0 {
		t.Errorf("the receiver got no span %q in the record's trace %s (got %v)", missing, rec.Record.TraceID, recv.Spans())
	}

	srv.stop(t)
	sc := bufio.NewScanner(strings.NewReader(srv.stderr.String()))
	lines := 0
	for sc.Scan() {
		lines++
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil || v["msg"] == nil || v["level"] == nil {
			t.Errorf("log line %q is not a JSON record: %v", sc.Text(), err)
		}
	}
	if lines == 0 {
		t.Error("the server logged nothing; want at least its development mode warning")
	}
}

func fmtMissing(want map[string]bool) []string {
	var out []string
	for name, ok := range want {
		if !ok {
			out = append(out, name)
		}
	}
	return out
}

// dashboardQueriesExist checks docs/dashboards/writ.json against a real
// scrape: every metric a panel queries is in it, and every writ_ metric
// in it is on a panel. A tenant with records and a checkpoint is
// scraped, so the per-tenant gauges are there.
func dashboardQueriesExist(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/ledger/checkpoint?tenant_id=acme", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST /v1/ledger/checkpoint = %d", resp.StatusCode)
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/dashboards/writ.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type, Title string
			Datasource  *struct{ UID string }
			Targets     []struct{ Expr, RefID string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/dashboards/writ.json: %v", err)
	}
	name := regexp.MustCompile(`\b(?:writ|go|process)_[a-z0-9_]+\b`)
	queried := map[string]bool{}
	panels := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: no queries, or not on the dashboard's data source", p.Title)
		}
		for _, tg := range p.Targets {
			found := name.FindAllString(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q queries no metric: %s", p.Title, tg.Expr)
			}
			for _, m := range found {
				fam := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(m, suffix); ok && fams[base].GetType().String() == "HISTOGRAM" {
						fam = base
					}
				}
				queried[fam] = true
				if _, ok := fams[fam]; !ok {
					t.Errorf("panel %q queries %s, which a scrape of writ serve does not have", p.Title, m)
				}
			}
		}
	}
	if panels < 10 {
		t.Errorf("the dashboard has %d panels", panels)
	}
	for fam := range fams {
		if strings.HasPrefix(fam, "writ_") && !queried[fam] {
			t.Errorf("%s is scraped but on no panel of docs/dashboards/writ.json", fam)
		}
	}
}
