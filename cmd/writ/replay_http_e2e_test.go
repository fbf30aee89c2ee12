package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// TestReplayOverHTTP is replay for auditors against a real `writ serve`
// with API keys: acme's auditor replays acme's high-value refund check
// (the record and its trace) and finds it replay_equal; globex's auditor
// finds it as missing as a record that does not exist; keys without the
// auditor role are refused.
func TestReplayOverHTTP(t *testing.T) {
	ctx := context.Background()
	w := newTenantWorld(t)
	auditor := clientFor(w.srv.url, w.tokens["acme/auditor"])

	res, err := auditor.Replay(ctx, "", w.recordID)
	if err != nil {
		t.Fatalf("Replay(%s) as acme's auditor: %v", w.recordID, err)
	}
	if res.Status != writ.ReplayEqual || res.TenantID != "acme" || res.RecordID != w.recordID ||
		res.Kind != "check" || res.DecisionKey != "support.refund.execute" || len(res.Differences) != 0 {
		t.Errorf("Replay(%s) = %+v, want replay_equal for acme's check", w.recordID, res)
	}

	// The record's trace holds only that check.
	rec, err := auditor.Record(ctx, "", w.recordID)
	if err != nil {
		t.Fatal(err)
	}
	traceID := rec.Record.TraceID
	if !writ.ValidTraceID(traceID) {
		t.Fatalf("record %s has trace id %q, want a W3C trace id", w.recordID, traceID)
	}
	results, err := auditor.ReplayTrace(ctx, "", traceID)
	if err != nil {
		t.Fatalf("ReplayTrace(%s): %v", traceID, err)
	}
	if len(results) != 1 || results[0].RecordID != w.recordID || results[0].Status != writ.ReplayEqual {
		t.Errorf("ReplayTrace(%s) = %+v, want the replay_equal replay of %s", traceID, results, w.recordID)
	}

	// The wire: 200 with the result as JSON, and a bad trace id is a 400
	// that names it.
	status, body := w.call(t, w.tokens["acme/auditor"], "GET", "/v1/records/"+w.recordID+"/replay", "")
	var wire map[string]any
	if err := json.Unmarshal(body, &wire); status != http.StatusOK || err != nil || wire["status"] != writ.ReplayEqual {
		t.Errorf("GET /v1/records/%s/replay = %d %s, want 200 with status replay_equal", w.recordID, status, body)
	}
	status, body = w.call(t, w.tokens["acme/auditor"], "GET", "/v1/replay?trace_id="+strings.ToUpper(traceID), "")
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"trace_id"`) {
		t.Errorf("GET /v1/replay with an uppercase trace id = %d %s, want 400 naming trace_id", status, body)
	}

	// globex's auditor: acme's record and trace are not found, exactly as
	// ones that exist nowhere, and as acme's record is on the record route.
	globex := w.tokens["globex/auditor"]
	const missingRecord, missingTrace = "dr_00000000000000000000000000", "0123456789abcdef0123456789abcdef"
	for _, tt := range []struct {
		name, foreign, missing, foreignID, missingID string
	}{
		{"record", "/v1/records/" + w.recordID + "/replay", "/v1/records/" + missingRecord + "/replay", w.recordID, missingRecord},
		{"trace", "/v1/replay?trace_id=" + traceID, "/v1/replay?trace_id=" + missingTrace, traceID, missingTrace},
		{"record route", "/v1/records/" + w.recordID + "/replay", "/v1/records/" + w.recordID, w.recordID, w.recordID},
	} {
		fs, fb := w.call(t, globex, "GET", tt.foreign, "")
		ms, mb := w.call(t, globex, "GET", tt.missing, "")
		if fs != http.StatusNotFound || ms != http.StatusNotFound {
			t.Errorf("globex: GET %s = %d %s, GET %s = %d %s; want 404 for both", tt.foreign, fs, fb, tt.missing, ms, mb)
			continue
		}
		got := strings.ReplaceAll(problem(t, fb), tt.foreignID, "ID")
		want := strings.ReplaceAll(problem(t, mb), tt.missingID, "ID")
		if got != want {
			t.Errorf("globex (%s): GET %s answers differently from GET %s:\n %s\n %s", tt.name, tt.foreign, tt.missing, got, want)
		}
	}
	if _, err := clientFor(w.srv.url, globex).Replay(ctx, "", w.recordID); writ.ErrorCode(err) != writ.ENOTFOUND {
		t.Errorf("Replay(%s) as globex's auditor: %v, want not_found", w.recordID, err)
	}
	if status, body := w.call(t, globex, "GET", "/v1/records/"+w.recordID+"/replay?tenant_id=acme", ""); status != http.StatusForbidden {
		t.Errorf("globex naming acme: GET /v1/records/%s/replay?tenant_id=acme = %d %s, want 403", w.recordID, status, body)
	}

	// Only auditors replay.
	for _, role := range []string{"agent", "approver", "admin"} {
		for _, path := range []string{"/v1/records/" + w.recordID + "/replay", "/v1/replay?trace_id=" + traceID} {
			status, body := w.call(t, w.tokens["acme/"+role], "GET", path, "")
			if status != http.StatusForbidden || !strings.Contains(string(body), "auditor") {
				t.Errorf("GET %s as acme's %s = %d %s, want 403 naming the auditor role", path, role, status, body)
			}
		}
	}
	if _, err := clientFor(w.srv.url, w.tokens["acme/agent"]).Replay(ctx, "", w.recordID); writ.ErrorCode(err) != writ.EFORBIDDEN {
		t.Errorf("Replay(%s) with an agent's key: %v, want forbidden", w.recordID, err)
	}
}
