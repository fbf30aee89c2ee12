package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/httpapi"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// refundEngine serves the refund example pack from a fresh SQLite store,
// at the examples' time.
func refundEngine(t *testing.T) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pack.Load(filepath.Join("..", "examples", "refund"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 5, 9, 9, 31, 42, 0, time.UTC)
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bytes.Repeat([]byte{0x5a}, 32),
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	putOnFile(t, eng, filepath.Join("..", "examples", "refund"))
	return eng
}

// azFromExample adapts a refund example check to the AuthZEN shape:
// subject = actor, action = tool and arguments, resource = the order,
// context = the rest of the check.
func azFromExample(t *testing.T, name string) (subject, action, resource, ctx map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "refund", "requests", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	actor := m["actor"].(map[string]any)
	subject = map[string]any{"type": strings.ToLower(actor["type"].(string)), "id": actor["id"],
		"properties": map[string]any{"workload_identity": actor["workload_identity"], "delegated_user_id": actor["delegated_user_id"]}}
	action = map[string]any{"name": m["tool"], "properties": m["arguments"]}
	// The order is the resource; the customer, whose refunds the pack
	// counts, another subject of the check.
	resource = map[string]any{"type": "order", "id": m["arguments"].(map[string]any)["order_id"],
		"properties": map[string]any{"subject_ids": []any{"customer:cus_77"}}}
	for _, k := range []string{"actor", "tool", "arguments", "subject_ids", "idempotency_key"} {
		delete(m, k)
	}
	return subject, action, resource, m
}

// evaluation is the AuthZEN evaluation of a refund example, with the
// refund amount changed when amount is not zero.
func evaluation(t *testing.T, name string, amount float64) map[string]any {
	s, a, r, c := azFromExample(t, name)
	if amount != 0 {
		a["properties"].(map[string]any)["amount_inr"] = amount
		c["outputs"].(map[string]any)["refund_amount_inr"] = amount
	}
	return map[string]any{"subject": s, "action": a, "resource": r, "context": c}
}

// batch is an AuthZEN evaluations request over the allow example whose
// evaluations differ only in the refund amount: subject and context are
// the batch's defaults, each evaluation its own action.
func batch(t *testing.T, semantic string, amounts ...float64) map[string]any {
	s, _, r, c := azFromExample(t, "refund-allow")
	var evs []any
	for _, amt := range amounts {
		ev := evaluation(t, "refund-allow", amt)
		evs = append(evs, map[string]any{"action": ev["action"]})
	}
	b := map[string]any{"subject": s, "resource": r, "context": c, "evaluations": evs}
	if semantic != "" {
		b["options"] = map[string]any{"evaluations_semantic": semantic, "another_option": "value"}
	}
	return b
}

// TestAuthZENEndToEnd adapts the request and response examples of the
// AuthZEN 1.0 specification (single evaluation, boxcarred evaluations
// with defaults, the three evaluation semantics, errors) to the refund
// pack, and checks each answer over HTTP against a real engine: the
// decisions, that every decision is a sealed record, and that bad input
// is a problem that writes nothing.
func TestAuthZENEndToEnd(t *testing.T) {
	mustJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	with := func(m map[string]any, f func(map[string]any)) map[string]any { f(m); return m }
	const review = 15000 // above the refund pack's human review threshold
	tests := []struct {
		name, path, body string
		contentType      string
		status           int
		decisions        []bool // nil for a problem
		records          int
		problemField     string
	}{
		{name: "single allow", path: "/access/v1/evaluation", body: mustJSON(evaluation(t, "refund-allow", 0)),
			status: 200, decisions: []bool{true}, records: 1},
		{name: "single human review", path: "/access/v1/evaluation", body: mustJSON(evaluation(t, "refund-high-value-human-review", 0)),
			status: 200, decisions: []bool{false}, records: 1},
		{name: "single goal fail", path: "/access/v1/evaluation", body: mustJSON(evaluation(t, "refund-account-frozen-goal-fail", 0)),
			status: 200, decisions: []bool{false}, records: 1},
		{name: "execute_all by default", path: "/access/v1/evaluations", body: mustJSON(batch(t, "", 4200, review, 3000)),
			status: 200, decisions: []bool{true, false, true}, records: 3},
		{name: "execute_all", path: "/access/v1/evaluations", body: mustJSON(batch(t, "execute_all", 4200, review, 3000)),
			status: 200, decisions: []bool{true, false, true}, records: 3},
		{name: "deny_on_first_deny", path: "/access/v1/evaluations", body: mustJSON(batch(t, "deny_on_first_deny", 4200, review, 3000)),
			status: 200, decisions: []bool{true, false}, records: 2},
		{name: "permit_on_first_permit", path: "/access/v1/evaluations", body: mustJSON(batch(t, "permit_on_first_permit", 4200, review, 3000)),
			status: 200, decisions: []bool{true}, records: 1},
		{name: "permit_on_first_permit after denials", path: "/access/v1/evaluations", body: mustJSON(batch(t, "permit_on_first_permit", review, review+1, 3000, 4200)),
			status: 200, decisions: []bool{false, false, true}, records: 3},
		{name: "an evaluation overrides a default", path: "/access/v1/evaluations", body: mustJSON(with(batch(t, "", 4200), func(b map[string]any) {
			ev := evaluation(t, "refund-account-frozen-goal-fail", 0)
			b["evaluations"] = append(b["evaluations"].([]any), map[string]any{"action": ev["action"], "context": ev["context"]})
		})), status: 200, decisions: []bool{true, false}, records: 2},

		// Bad input: a problem, and nothing written.
		{name: "no subject", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { delete(m, "subject") })),
			status: 400, problemField: "subject"},
		{name: "unknown subject type", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { m["subject"].(map[string]any)["type"] = "robot" })),
			status: 400, problemField: "subject.type"},
		{name: "no action name", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { m["action"] = map[string]any{} })),
			status: 400, problemField: "action.name"},
		{name: "resource without id", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { m["resource"] = map[string]any{"type": "order"} })),
			status: 400, problemField: "resource.id"},
		{name: "actor in the context", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) {
			m["context"].(map[string]any)["actor"] = map[string]any{"type": "AGENT", "id": "x"}
		})), status: 400, problemField: "context.actor"},
		{name: "unknown context member", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { m["context"].(map[string]any)["time"] = "1985-10-26T01:22-07:00" })),
			status: 400, problemField: "context.time"},
		{name: "no tenant", path: "/access/v1/evaluation", body: mustJSON(with(evaluation(t, "refund-allow", 0), func(m map[string]any) { delete(m["context"].(map[string]any), "tenant_id") })),
			status: 400, problemField: "context.tenant_id"},
		{name: "not JSON", path: "/access/v1/evaluation", body: `{"subject":`, status: 400},
		{name: "not declared JSON", path: "/access/v1/evaluation", body: mustJSON(evaluation(t, "refund-allow", 0)), contentType: "text/plain", status: 415},
		{name: "unknown semantic", path: "/access/v1/evaluations", body: mustJSON(batch(t, "first_wins", 4200)),
			status: 400, problemField: "options.evaluations_semantic"},
		{name: "no evaluations", path: "/access/v1/evaluations", body: mustJSON(batch(t, "")),
			status: 400, problemField: "evaluations"},
		{name: "a malformed evaluation refuses the batch", path: "/access/v1/evaluations", body: mustJSON(with(batch(t, "", 4200, 3000), func(b map[string]any) {
			b["evaluations"] = append(b["evaluations"].([]any), map[string]any{"action": map[string]any{"name": ""}})
		})), status: 400, problemField: "evaluations[2].action.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := refundEngine(t)
			onFile, err := eng.Records(context.Background(), writ.RecordQuery{TenantID: "acme"}) // the evidence on file
			if err != nil {
				t.Fatal(err)
			}
			srv := validated(t, httptest.NewServer(httpapi.NewServer(eng, httpapi.Config{})))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			req.Header.Set("X-Request-ID", "bfe9eb29-ab87-4ca3-be83-a1d5d8305716")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			page, err := eng.Records(context.Background(), writ.RecordQuery{TenantID: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(page.Records) - len(onFile.Records); n != tt.records {
				t.Errorf("%d records written, want %d", n, tt.records)
			}
			if tt.decisions == nil {
				if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type = %q, want application/problem+json", ct)
				}
				if tt.problemField != "" && !strings.Contains(string(body), `"field":"`+tt.problemField+`"`) {
					t.Errorf("the problem does not name the field %s: %s", tt.problemField, body)
				}
				return
			}
			if got := resp.Header.Get("X-Request-ID"); got != "bfe9eb29-ab87-4ca3-be83-a1d5d8305716" {
				t.Errorf("X-Request-ID = %q, want the request's echoed", got)
			}
			type decision struct {
				Decision bool `json:"decision"`
				Context  struct {
					DecisionID string        `json:"decision_id"`
					RecordID   string        `json:"record_id"`
					Receipt    *writ.Receipt `json:"receipt"`
				} `json:"context"`
			}
			var got []decision
			if tt.path == "/access/v1/evaluation" {
				var d decision
				err = json.Unmarshal(body, &d)
				got = []decision{d}
			} else {
				var b struct{ Evaluations []decision }
				err = json.Unmarshal(body, &b)
				got = b.Evaluations
			}
			if err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if len(got) != len(tt.decisions) {
				t.Fatalf("%d decisions, want %d: %s", len(got), len(tt.decisions), body)
			}
			for i, d := range got {
				if d.Decision != tt.decisions[i] {
					t.Errorf("evaluation %d: decision = %v, want %v", i, d.Decision, tt.decisions[i])
				}
				rc := d.Context.Receipt
				if rc == nil || rc.SafeToExecute != d.Decision || rc.Metadata.RecordID != d.Context.RecordID || rc.DecisionID != d.Context.DecisionID {
					t.Errorf("evaluation %d: context %+v does not carry the receipt it decided by", i, d.Context)
					continue
				}
				rec, err := eng.Record(context.Background(), "acme", d.Context.RecordID)
				if err != nil {
					t.Errorf("evaluation %d: record %s: %v", i, d.Context.RecordID, err)
					continue
				}
				if rec.Record.DecisionID != d.Context.DecisionID {
					t.Errorf("evaluation %d: record %s is of decision %s, want %s", i, d.Context.RecordID, rec.Record.DecisionID, d.Context.DecisionID)
				}
			}
		})
	}
}

// TestAuthZENMetadataEndToEnd fetches the PDP metadata and checks its
// endpoints are the server's.
func TestAuthZENMetadataEndToEnd(t *testing.T) {
	srv := validated(t, httptest.NewServer(httpapi.NewServer(refundEngine(t), httpapi.Config{})))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/.well-known/authzen-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md httpapi.AuthZENMetadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	want := httpapi.AuthZENMetadata{Issuer: srv.URL, AccessEvaluationEndpoint: srv.URL + "/access/v1/evaluation",
		AccessEvaluationsEndpoint: srv.URL + "/access/v1/evaluations"}
	if md != want {
		t.Errorf("metadata = %+v, want %+v", md, want)
	}
}
