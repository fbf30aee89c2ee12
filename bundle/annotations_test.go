package bundle_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"encoding/json"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/replay"
	"github.com/writhq/writ/sqlite"
)

// TestRecordsAboutRecordsVerify: a bundle of a ledger with a retraction,
// a feedback entry and replay results verifies intact (seal, chain,
// signatures, tree, checkpoints and the record rules of each kind), and a
// byte changed in the retraction is caught.
func TestRecordsAboutRecordsVerify(t *testing.T) {
	ctx := context.Background()
	ring := seededRing(t, "writ-test", 0x42, exampleClock.Add(-time.Hour))
	p, err := pack.Load(refundPack)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bindingKey, Keys: keySource(ring), Random: newSeededReader(3),
		Now: func() time.Time { return exampleClock }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"refund-allow", "refund-account-frozen-goal-fail"} {
		data, err := os.ReadFile(filepath.Join(refundPack, "requests", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var req writ.CheckRequest
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		rc, err := eng.Check(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rc.Metadata.RecordID)
	}
	ret, err := eng.Retract(ctx, &writ.RetractRequest{TenantID: "acme", RecordID: ids[1], By: "auditor_1", Reason: "decided on a stale fraud score"})
	if err != nil {
		t.Fatal(err)
	}
	score := 0.9
	if _, err := eng.Feedback(ctx, &writ.FeedbackRequest{TenantID: "acme", RecordID: ids[0], Author: "lead_1", Label: "correct", Score: &score}); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.New(st, replay.Options{}).Tenant(ctx, "acme", func(res *replay.Result) error {
		_, err := eng.RecordReplay(ctx, res)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	data := export(t, st, ring.Keys())
	rep := verifyBundle(t, openBytes(t, data))
	if len(rep.Findings) != 0 {
		t.Fatalf("the intact bundle has findings: %+v", rep.Findings)
	}
	a := readArchive(t, data)
	lines := a.lines("acme")
	var keys []string
	at := -1
	for i, l := range lines {
		var h struct {
			RecordID    string `json:"record_id"`
			DecisionKey string `json:"decision_key"`
		}
		if err := json.Unmarshal(l, &h); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, h.DecisionKey)
		if h.RecordID == ret.RecordID {
			at = i
		}
	}
	for _, want := range []string{"retraction:support.refund.execute", "feedback:support.refund.execute", "replay:support.refund.execute", "replay:retraction:support.refund.execute"} {
		if !slices.Contains(keys, want) {
			t.Errorf("the bundle holds no %s record (keys %v)", want, keys)
		}
	}
	if at < 0 {
		t.Fatal("the retraction is not in the bundle")
	}
	i := bytes.Index(lines[at], []byte("stale"))
	lines[at][i] ^= 0x01 // "stale" becomes "rtale": still JSON
	a.setLines("acme", lines)
	rep = verifyBundle(t, openBytes(t, a.bytes(t)))
	if !slices.Contains(kinds(rep), verify.FindingHashMismatch) {
		t.Errorf("a byte changed in the retraction: findings %v, want %s", kinds(rep), verify.FindingHashMismatch)
	}
}
