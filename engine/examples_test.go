package engine_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/golden/<name>, or rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./engine -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (run go test ./engine -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestExamples runs every example request through the engine under its
// pack and keeps its receipt and sealed record as golden files.
func TestExamples(t *testing.T) {
	packs, _ := filepath.Glob(example("*", "pack.yaml"))
	if len(packs) < 2 {
		t.Fatalf("found %d example packs, want at least 2", len(packs))
	}
	for _, pk := range packs {
		dir := filepath.Dir(pk)
		h := newHarness(t, dir)
		files, _ := filepath.Glob(filepath.Join(dir, "requests", "*.json"))
		for _, f := range files {
			name := filepath.Base(dir) + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
			t.Run(name, func(t *testing.T) {
				rc, err := h.eng.Check(context.Background(), readRequest(t, f))
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if rc.Metadata.RecordID == "" || rc.Metadata.Repeated != "" {
					t.Fatalf("receipt metadata = %+v, want a fresh decision with a record id", rc.Metadata)
				}
				rec, err := h.eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
				if err != nil {
					t.Fatalf("Record(%s): %v", rc.Metadata.RecordID, err)
				}
				if rec.Record.DecisionID != rc.DecisionID || rec.Record.Status == "" {
					t.Errorf("record %s has decision_id %s status %q, receipt has %s", rec.Record.RecordID, rec.Record.DecisionID, rec.Record.Status, rc.DecisionID)
				}
				golden(t, name+".receipt.json", indent(t, rc))
				var pretty any
				if err := json.Unmarshal(rec.Raw, &pretty); err != nil {
					t.Fatal(err)
				}
				golden(t, name+".record.json", indent(t, pretty))
			})
		}
		h.verify(t)
	}
}

// TestSeedExampleReceipt checks the WF-2302 receipt against the receipt
// contract's own example, field for field: only decision_id (an id) and
// metadata (writ's runtime metadata) may differ, and writ's added fields
// (the *_conditions siblings) are allowed alongside.
func TestSeedExampleReceipt(t *testing.T) {
	seed, err := os.ReadFile(filepath.Join("testdata", "seed-receipt-2302.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(seed, &want); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, example("wf-2302"))
	rc, err := h.eng.Check(context.Background(), readRequest(t, example("wf-2302", "requests", "wf-2302-upstream-replan.json")))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(indent(t, rc), &got); err != nil {
		t.Fatal(err)
	}
	for key, w := range want {
		switch key {
		case "decision_id":
			if s, _ := got[key].(string); !strings.HasPrefix(s, "dec_") {
				t.Errorf("decision_id = %v, want a dec_ id", got[key])
			}
		case "metadata":
			md, _ := got[key].(map[string]any)
			if md["record_id"] == nil || md["record_id"] == "" {
				t.Errorf("metadata.record_id is missing: %v", md)
			}
		default:
			compareSubset(t, key, w, got[key])
		}
	}
}

// compareSubset reports where got lacks or differs from want; objects in
// got may have extra members.
func compareSubset(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s = %v, want an object", path, got)
			return
		}
		for k, v := range w {
			compareSubset(t, path+"."+k, v, g[k])
		}
	default:
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s = %v, want %v (as in the seed's example receipt)", path, got, want)
		}
	}
}

// TestExampleRecordsCarryTheSeedFields checks the refund record holds
// every field of the minimum viable record.
func TestExampleRecordsCarryTheSeedFields(t *testing.T) {
	h := newHarness(t, example("refund"))
	rc, err := h.eng.Check(context.Background(), readRequest(t, example("refund", "requests", "refund-allow.json")))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.eng.Record(context.Background(), "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"record_id", "decision_key", "decision_version", "status", "actor", "subject_ids", "outputs",
		"evidence_refs", "policy_decisions", "approvals", "controls_active", "lineage", "trace_id",
		"timestamp", "intent_ref", "inputs_refs", "tool_lineage", "scorecard", "budget_usage", "replay", "audit"} {
		if _, ok := m[f]; !ok {
			t.Errorf("record lacks %s", f)
		}
	}
	r := rec.Record
	if r.Lineage.PackVersion != "support@1.0.0" || !strings.HasPrefix(r.Lineage.PackHash, "sha256:") {
		t.Errorf("lineage pins pack %q %q, want support@1.0.0 and its hash", r.Lineage.PackVersion, r.Lineage.PackHash)
	}
	if len(r.ToolLineage) != 1 || r.ToolLineage[0].IdempotencyKey != "ik_2x9k4j7m1q8w0p3z" || r.ToolLineage[0].ToolCallID != "tc_121" {
		t.Errorf("tool_lineage = %+v, want the checked call with its idempotency key", r.ToolLineage)
	}
	if !writ.ValidTraceID(r.TraceID) {
		t.Errorf("trace_id %q is not a W3C trace id", r.TraceID)
	}
	// The evidence on file (the IDV service's idv_771) comes first.
	if r.Audit.Seq != h.onFile["acme"]+1 || !strings.HasPrefix(r.Audit.PrevHash, "sha256:") || r.Audit.PrevHash == writ.GenesisHash || !strings.HasPrefix(r.Audit.RecordHash, "sha256:") {
		t.Errorf("audit = %+v, want seq %d chained to the evidence on file, with a record hash", r.Audit, h.onFile["acme"]+1)
	}
}
