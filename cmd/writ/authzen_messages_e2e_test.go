package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestAuthZENBadInputMessagesForPeople sends the inputs issue 38 found
// bent (null, integers beyond 2^53-1, years 0001 and 9999, outputs that
// break the outputs schema) through the AuthZEN face, one evaluation and
// a batch of one, and checks that each is refused with 400 naming the
// member, in words (a batch may answer it in the evaluation's place),
// with no Go value formatting in it (the face once answered "&{-5/1 0/1}").
func TestAuthZENBadInputMessagesForPeople(t *testing.T) {
	srv := startServer(t, t.TempDir(), "../../examples/refund")
	good, err := os.ReadFile("../../examples/refund/requests/refund-allow.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		bend func(ev map[string]any)
		says string
	}{
		{"null subject", func(ev map[string]any) { ev["subject"] = nil }, `subject`},
		{"null idempotency key", func(ev map[string]any) { azContext(ev)["idempotency_key"] = nil }, `context.idempotency_key","message":"must not be null`},
		{"2^53+1", func(ev map[string]any) { properties(ev)["amount_inr"] = json.Number("9007199254740993") }, `number 9007199254740993 is beyond`},
		{"2^63", func(ev map[string]any) { properties(ev)["amount_inr"] = json.Number("9223372036854775808") }, `number 9223372036854775808 is beyond`},
		{"year 0001", func(ev map[string]any) { evidence(ev)["observed_at"] = "0001-01-01T00:00:00Z" }, `outside the window`},
		{"year 9999", func(ev map[string]any) { evidence(ev)["observed_at"] = "9999-12-31T23:59:59Z" }, `outside the window`},
		{"outputs currency", func(ev map[string]any) { outputs(ev)["currency"] = "USD" }, `outputs.currency`},
		{"outputs amount", func(ev map[string]any) { outputs(ev)["refund_amount_inr"] = json.Number("-5") }, `outputs.refund_amount_inr`},
	}
	for _, tt := range tests {
		for _, batch := range []bool{false, true} {
			ev := evaluationOf(t, good)
			tt.bend(ev)
			path, body := "/access/v1/evaluation", any(ev)
			if batch {
				path, body = "/access/v1/evaluations", map[string]any{"evaluations": []any{ev}}
			}
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(srv.url+path, "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			var problem bytes.Buffer
			_, _ = problem.ReadFrom(resp.Body)
			resp.Body.Close()
			text := problem.String()
			// A batch answers an evaluation the engine refuses in its
			// place, as a denial with the error (AuthZEN's batch).
			refused := resp.StatusCode == http.StatusBadRequest && resp.Header.Get("Content-Type") == "application/problem+json" ||
				batch && resp.StatusCode == http.StatusOK && strings.Contains(text, `{"decision":false,"context":{"error":{"status":400,"code":"invalid"`)
			if !refused {
				t.Errorf("POST %s (%s) = %d %s %s, want it refused with 400", path, tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), text)
			}
			if !strings.Contains(text, tt.says) {
				t.Errorf("POST %s (%s) = %s, want it to say %q", path, tt.name, text, tt.says)
			}
			for _, mark := range []string{"&{", "map[", "%!"} {
				if strings.Contains(text, mark) {
					t.Errorf("POST %s (%s) = %s: Go value formatting %q", path, tt.name, text, mark)
				}
			}
		}
	}
}

// evaluationOf maps a check request onto an AuthZEN evaluation, as the
// face maps it back: actor → subject, tool and arguments → action, the
// first subject id → resource, every other member → context.
func evaluationOf(t *testing.T, check []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(check))
	dec.UseNumber()
	var req map[string]any
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	actor := req["actor"].(map[string]any)
	subjects := req["subject_ids"].([]any)
	typ, id, _ := strings.Cut(subjects[0].(string), ":")
	ev := map[string]any{
		"subject":  map[string]any{"type": "agent", "id": actor["id"]},
		"action":   map[string]any{"name": req["tool"], "properties": req["arguments"]},
		"resource": map[string]any{"type": typ, "id": id, "properties": map[string]any{"subject_ids": subjects[1:]}},
	}
	for _, k := range []string{"actor", "tool", "arguments", "subject_ids"} {
		delete(req, k)
	}
	ev["context"] = req
	return ev
}

func azContext(ev map[string]any) map[string]any { return ev["context"].(map[string]any) }
func properties(ev map[string]any) map[string]any {
	return ev["action"].(map[string]any)["properties"].(map[string]any)
}
func outputs(ev map[string]any) map[string]any { return azContext(ev)["outputs"].(map[string]any) }
func evidence(ev map[string]any) map[string]any {
	return azContext(ev)["evidence"].([]any)[0].(map[string]any)
}
