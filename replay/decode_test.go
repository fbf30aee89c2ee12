package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// FuzzDecodeEnvelope: whatever decodeEnvelope accepts as a check request
// is stored again (record.Envelope) as bytes that decode to the same
// request and encode to the same bytes. An envelope writ wrote therefore
// decodes into the request that hashes to its replay_packet_id.
func FuzzDecodeEnvelope(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*", "requests", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"tenant_id":"acme","tool":"t","arguments":{"a":[1,2.5e-7,"x",null,{"b":true}]},"evidence":[{"kind":"k","id":"i","observed_at":"2026-05-09T09:10:00.123456789+02:00"}]}`))
	f.Add([]byte(`{"tenant_id":"acme","tenant_id":"other"}`))
	f.Add([]byte(`{"tenant_id":"acme","unknown":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req writ.CheckRequest
		if err := decodeEnvelope(data, &req); err != nil {
			return
		}
		stored, err := record.Envelope(&req, nil)
		if err != nil {
			return // a value encoding/json cannot write (not reachable from JSON input)
		}
		var again writ.CheckRequest
		if err := decodeEnvelope(stored, &again); err != nil {
			t.Fatalf("the stored envelope %s does not decode: %v", stored, err)
		}
		restored, err := record.Envelope(&again, nil)
		if err != nil || !bytes.Equal(stored, restored) {
			t.Fatalf("envelope round trip:\n%s\n%s (%v)", stored, restored, err)
		}
	})
}

func TestDecodeEnvelopeIsStrict(t *testing.T) {
	for _, in := range []string{
		`{"tenant_id":"acme","tenant_id":"other"}`,
		`{"tenant_id":"acme","Tenant_ID":"other"}`,
		`{"tenant_id":"acme","unknown":1}`,
		`{"tenant_id":"acme"} {}`,
		`null`,
		`[]`,
		`{"tenant_id":"acme","usage":{"tokens":"many"}}`,
	} {
		var req writ.CheckRequest
		if err := decodeEnvelope([]byte(in), &req); err == nil {
			t.Errorf("decodeEnvelope(%s) = nil error, want one", in)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		kind, path  string
		packChanged bool
		want        string
	}{
		{KindCheck, "evidence_refs[1]", false, ClassEvidence},
		{KindCheck, "evidence_refs", false, ClassEvidence},
		{KindCheck, "replay.evidence_snapshot_hash", false, ClassEvidence},
		{KindCheck, "policy_decisions[4].verdict", false, ClassPolicy},
		{KindCheck, "status", false, ClassPolicy},
		{KindCheck, "outputs.outcome", false, ClassPolicy},
		{KindCheck, "outputs.refund_amount_inr", false, ClassRecord},
		{KindCheck, `outputs["a.b"]`, false, ClassRecord},
		{KindStepVerdict, "outputs.next_step", false, ClassPolicy},
		{KindCheck, "lineage.pack_hash", true, ClassPolicy},
		{KindCheck, "lineage.policy_versions[0]", false, ClassPolicy},
		{KindCheck, "lineage.kg_snapshot", false, ClassRecord},
		{KindCheck, "controls_active.must_refuse", false, ClassPolicy},
		{KindCheck, "approvals", false, ClassPolicy},
		{KindCheck, "approval_mode_effective", false, ClassPolicy},
		{KindCheck, "tool_lineage[0].tool_result_id", false, ClassToolTranscript},
		{KindCheck, "replay.tool_transcript_chain_hash", false, ClassToolTranscript},
		{KindCheck, "replay.compiled_context_hash", false, ClassCompiledContext},
		{KindCheck, "replay.compiled_context_hash", true, ClassPolicy},
		{KindCheck, "scorecard.utility", false, ClassScorecard},
		{KindCheck, "scorecard", false, ClassScorecard},
		{KindCheck, "scorecard_failed", false, ClassScorecard},
		{KindCheck, "scorecard_failed[0]", false, ClassScorecard},
		{KindCheck, "scorecard_failed", true, ClassPolicy},
		{KindCheck, "replay.arguments_digest", false, ClassRecord},
		{KindStepVerdict, "replay.arguments_digest", false, ClassEvidence},
		{KindCheck, "trace_id", false, ClassRecord},
		{KindCheck, "actor.id", false, ClassRecord},
	}
	for _, tc := range tests {
		if got := Classify(tc.kind, tc.path, tc.packChanged); got != tc.want {
			t.Errorf("Classify(%s, %s, %v) = %s, want %s", tc.kind, tc.path, tc.packChanged, got, tc.want)
		}
	}
}

func TestDiffRecords(t *testing.T) {
	a := `{"audit":{"seq":1},"outputs":{"a.b":1,"n":1.50,"same":"x"},"list":[1,2],"short":[1],"gone":true}`
	b := `{"audit":{"seq":2},"outputs":{"a.b":2,"n":1.5,"same":"x"},"list":[1,3],"short":[1,2],"new":null}`
	ds, err := diffRecords([]byte(a), []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Path+" "+string(d.Recorded)+" "+string(d.Replayed))
	}
	// Numbers compare as written: both sides are canonical JSON, where
	// 1.50 cannot occur, so a difference in spelling is a difference.
	want := []string{"gone true ", "list[1] 2 3", "new  null", `outputs["a.b"] 1 2`, "outputs.n 1.50 1.5", "short [1] [1,2]"}
	if b, _ := json.Marshal(got); !bytes.Equal(b, mustJSON(want)) {
		t.Errorf("diffRecords = %q, want %q", got, want)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
