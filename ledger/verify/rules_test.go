package verify_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/pinned"
)

type memBlobs map[string][]byte

func (m memBlobs) Blob(_ context.Context, hash string) ([]byte, error) {
	if b, ok := m[hash]; ok {
		return b, nil
	}
	return nil, writ.Errorf(writ.ENOTFOUND, "no blob %s", hash)
}

func refundBlobs(t *testing.T) memBlobs {
	t.Helper()
	p, err := pack.Load("../../examples/refund")
	if err != nil {
		t.Fatal(err)
	}
	m := memBlobs{p.Hash: p.Manifest}
	for _, f := range p.Files {
		m[f.Hash] = f.Data
	}
	return m
}

func goldenRecord(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../engine/testdata/golden/refund/" + name + ".record.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRules(t *testing.T) {
	rules := verify.NewRules(pinned.NewPacks(refundBlobs(t)))
	tests := []struct {
		name   string
		record string
		edit   func(m map[string]any)
		want   string // "" = no rule broken
	}{
		{"allowed refund", "refund-allow", func(map[string]any) {}, ""},
		{"escalated refund", "refund-high-value-human-review", func(map[string]any) {}, ""},
		{"unknown field", "refund-allow", func(m map[string]any) { m["extra"] = 1 }, "schema: "},
		{"missing field", "refund-allow", func(m map[string]any) { delete(m, "approvals") }, "schema: required field approvals"},
		{"null field", "refund-allow", func(m map[string]any) { m["approvals"] = nil }, "schema: required field approvals"},
		// Present but empty members decode to zero values, like absent
		// ones, and are still present.
		{"empty fields", "refund-allow", func(m map[string]any) { m["inputs_refs"], m["record_id"] = map[string]any{}, "" }, ""},
		{"bad status", "refund-allow", func(m map[string]any) { m["status"] = "MAYBE" }, "schema: status"},
		{"outputs break the spec", "refund-allow", func(m map[string]any) { m["outputs"].(map[string]any)["currency"] = "USD" }, "schema: outputs do not match"},
		{"allowed without evidence", "refund-allow", func(m map[string]any) { m["evidence_refs"] = []any{"order:ord_881#1"} }, "evidence: the decision was allowed without the identity_verification evidence"},
		{"no policy decisions", "refund-allow", func(m map[string]any) { m["policy_decisions"] = []any{} }, "policy: the record lists no policy decision"},
		{"wrong bundle version", "refund-allow", func(m map[string]any) {
			m["lineage"].(map[string]any)["policy_versions"] = []any{"POLICY_RETURNS_V1@0.9.0"}
		}, "policy: policy_versions"},
		{"scorecard failed without a pass mark", "refund-allow", func(m map[string]any) { m["scorecard_failed"] = []any{"utility"} }, `policy: scorecard_failed ["utility"], but the pass mark of support.refund.execute@1.0.0 gives []`},
		{"allowed past an approval", "refund-high-value-human-review", func(m map[string]any) { m["status"] = "DECIDED" }, "approval: a require_approval rule fired"},
		{"control missing", "refund-allow", func(m map[string]any) {
			m["controls_active"].(map[string]any)["must_refuse"] = []any{}
		}, "controls: must_refuse control account_frozen was active at compile time but is missing from the record"},
		{"control unknown", "refund-allow", func(m map[string]any) {
			m["controls_active"].(map[string]any)["must_escalate"] = []any{"fraud_signal_high", "made_up"}
		}, "controls: must_escalate control made_up is listed but was not active at compile time"},
		{"approval gate missing", "refund-high-value-human-review", func(m map[string]any) {
			m["controls_active"].(map[string]any)["approval_gates_active"] = []any{}
		}, "controls: approval gate control GATE_FINANCE_APPROVAL was active at compile time but is missing from the record"},
		// A record whose compiled context hash names no compilation of
		// its spec is held to what the pack defines.
		{"control missing, hash edited", "refund-allow", func(m map[string]any) {
			m["controls_active"].(map[string]any)["must_refuse"] = []any{}
			m["replay"].(map[string]any)["compiled_context_hash"] = "sha256:" + strings.Repeat("0", 64)
		}, "controls: must_refuse control account_frozen was in force but is not listed"},
		{"unpinned pack", "refund-allow", func(m map[string]any) { m["lineage"].(map[string]any)["pack_hash"] = "sha256:00" }, "lineage: pinned pack sha256:00"},
		{"wrong spec version", "refund-allow", func(m map[string]any) { m["decision_version"] = "2.0.0" }, "lineage: decision spec"},
		{"bad trace", "refund-allow", func(m map[string]any) { m["trace_id"] = "nope" }, "trace: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := goldenRecord(t, tt.record)
			tt.edit(m)
			raw, _ := json.Marshal(m)
			got := rules.Check(context.Background(), raw)
			if tt.want == "" {
				if len(got) != 0 {
					t.Errorf("Check = %v, want no broken rule", got)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("Check = %v, want a finding containing %q", got, tt.want)
			}
		})
	}
}

// flakyBlobs fails its first failures reads, as a store does when a read
// is cancelled or times out, then serves blobs.
type flakyBlobs struct {
	memBlobs
	mu       sync.Mutex
	failures int
}

func (f *flakyBlobs) Blob(ctx context.Context, hash string) ([]byte, error) {
	f.mu.Lock()
	fail := f.failures > 0
	f.failures--
	f.mu.Unlock()
	if fail {
		return nil, context.DeadlineExceeded
	}
	return f.memBlobs.Blob(ctx, hash)
}

// TestRulesDoNotKeepAFailedPackRead: a transient failure to read the
// pinned pack is a finding of the record being checked, not of every
// record of that pack checked after it.
func TestRulesDoNotKeepAFailedPackRead(t *testing.T) {
	rules := verify.NewRules(pinned.NewPacks(&flakyBlobs{memBlobs: refundBlobs(t), failures: 1}))
	raw, _ := json.Marshal(goldenRecord(t, "refund-allow"))
	if got := rules.Check(context.Background(), raw); !strings.Contains(strings.Join(got, "\n"), "lineage: pinned pack") {
		t.Fatalf("Check while the pack cannot be read = %v, want a lineage finding", got)
	}
	if got := rules.Check(context.Background(), raw); len(got) != 0 {
		t.Errorf("Check once the pack can be read = %v, want no broken rule", got)
	}
}

// stalledBlobs holds every read of the refund pack's manifest until
// release is closed, and tells started when the first one begins.
type stalledBlobs struct {
	memBlobs
	manifest         string
	started, release chan struct{}
	once             sync.Once
}

func (s *stalledBlobs) Blob(ctx context.Context, hash string) ([]byte, error) {
	if hash == s.manifest {
		s.once.Do(func() { close(s.started) })
		<-s.release
	}
	return s.memBlobs.Blob(ctx, hash)
}

// TestRulesReadPacksWithoutALock: while one pinned pack is read, records
// of other packs are checked (parallel verification does not queue
// behind one slow read); on the old code this test never ends.
func TestRulesReadPacksWithoutALock(t *testing.T) {
	m := refundBlobs(t)
	rec := goldenRecord(t, "refund-allow")
	sb := &stalledBlobs{memBlobs: m, manifest: rec["lineage"].(map[string]any)["pack_hash"].(string), started: make(chan struct{}), release: make(chan struct{})}
	rules := verify.NewRules(pinned.NewPacks(sb))
	raw, _ := json.Marshal(rec)
	slow := make(chan []string)
	go func() { slow <- rules.Check(context.Background(), raw) }()
	<-sb.started
	other := goldenRecord(t, "refund-allow")
	other["lineage"].(map[string]any)["pack_hash"] = "sha256:00"
	rawOther, _ := json.Marshal(other)
	if got := rules.Check(context.Background(), rawOther); !strings.Contains(strings.Join(got, "\n"), "lineage: pinned pack sha256:00") {
		t.Errorf("Check of another pack's record = %v, want its lineage finding", got)
	}
	close(sb.release)
	if got := <-slow; len(got) != 0 {
		t.Errorf("Check of the stalled pack's record = %v, want no broken rule", got)
	}
}
