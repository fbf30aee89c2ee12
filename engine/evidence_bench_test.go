package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
)

// evidenceCitations stores n evidence items in the engine's store (by an
// issuer key of acme, as POST /v1/evidence does) and returns citations of
// them: the first is the legal review the WF-2302 rule reads, cited by
// id; the others alternate between id and content address, so that both
// halves of the store's read are exercised.
func evidenceCitations(t testing.TB, eng *engine.Engine, n int) []writ.Evidence {
	t.Helper()
	idv := writ.WithPrincipal(context.Background(), &writ.Principal{TenantID: "acme", KeyID: "key_legal", Subject: "legal.acme.example",
		Roles: []writ.Role{writ.RoleIssuer}, ActorType: writ.ActorService})
	observed := exampleClock.Add(-5 * time.Minute)
	var out []writ.Evidence
	for i := range n {
		req := writ.AddEvidenceRequest{TenantID: "acme", Kind: "legal_review", ID: "lr_2302", ObservedAt: &observed,
			SubjectIDs: []string{"workflow:WF-2302"}, Attributes: map[string]any{"status": "approved_with_follow_up"}}
		if i > 0 {
			req.Kind, req.ID = fmt.Sprintf("supporting_fact_%d", i), fmt.Sprintf("fact_%d", i)
			req.Attributes = map[string]any{"n": float64(i)}
		}
		se, err := eng.AddEvidence(idv, &req)
		if err != nil {
			t.Fatalf("AddEvidence(%s): %v", req.ID, err)
		}
		c := writ.Evidence{Kind: req.Kind, ID: req.ID}
		if i%2 == 0 && i > 0 {
			c.ID = se.ContentAddress
		}
		out = append(out, c)
	}
	return out
}

// BenchmarkCheckEvidence is issue 32's figure: the CPU and wall time of a
// signed, durable check (BenchmarkCheckStorage's "durable" case, on SQLite
// and PostgreSQL) as its
// cited evidence grows. "today" is the example request as it is, one citation that resolves to nothing
// (the one read BenchmarkCheckStorage already pays); "three" cites three
// items the store holds, resolved by id and content address. All of a
// check's citations are resolved with one Store.EvidenceRecords call,
// one SQL statement (TestEvidenceOneReadPerCheck proves the count), so
// "three" should cost about what "today" costs. Compare with
//
//	go test ./engine -run '^$' -bench CheckEvidence -benchtime 2000x -count 6 > ev.txt
//	benchstat -col /evidence ev.txt
//
// PostgreSQL runs when WRIT_TEST_POSTGRES is set.
func BenchmarkCheckEvidence(b *testing.B) {
	// Signed with Ed25519 as writ serve signs, like BenchmarkCheckStorage.
	ring, err := keyring.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ring.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), exampleClock.Add(-time.Hour), "bench"); err != nil {
		b.Fatal(err)
	}
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		b.Fatal(err)
	}
	seal := ledger.NewSeal(func(time.Time) (ledger.Signer, error) { return signer, nil })
	for _, storeName := range []string{"sqlite", "postgres"} {
		b.Run("store="+storeName, func(b *testing.B) {
			for _, cites := range []string{"today", "three"} {
				b.Run("evidence="+cites, func(b *testing.B) {
					st := testStore(b, storeName)
					h := newHarness(b, example("wf-2302"), func(c *engine.Config) {
						c.Store = st
						c.Appender.Seal = seal
					})
					base := readRequest(b, example("wf-2302", "requests", "wf-2302-allow.json"))
					if cites == "three" {
						base.Evidence = evidenceCitations(b, h.eng, 3)
					}
					var seq atomic.Int64
					b.SetParallelism(16)
					before := cpuTime(b)
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							req := *base
							n := seq.Add(1)
							req.Arguments = map[string]any{"workflow_ref": "WF-2302", "seq": float64(n)}
							rc, err := h.eng.Check(context.Background(), &req)
							if err != nil || !rc.SafeToExecute {
								b.Fatalf("check %d: %v %+v", n, err, rc)
							}
						}
					})
					b.StopTimer()
					b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/check")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
				})
			}
		})
	}
}

// countingStore counts the evidence reads a store serves.
type countingStore struct {
	ledger.Store
	reads atomic.Int64
	asked atomic.Int64 // ids and addresses asked for, over all reads
}

func (s *countingStore) EvidenceRecords(ctx context.Context, tenantID string, ids, addresses []string) ([]writ.StoredRecord, error) {
	s.reads.Add(1)
	s.asked.Add(int64(len(ids) + len(addresses)))
	return s.Store.EvidenceRecords(ctx, tenantID, ids, addresses)
}

// TestEvidenceOneReadPerCheck proves the evidence lookup is batched, not
// a query per item: a check citing n stored items makes exactly one
// evidence read (one SQL statement in either store) asking for all n,
// whatever n is, and resolves every one of them; a check citing none
// makes none. SQLite and PostgreSQL.
func TestEvidenceOneReadPerCheck(t *testing.T) {
	for _, storeName := range []string{"sqlite", "postgres"} {
		t.Run(storeName, func(t *testing.T) {
			st := &countingStore{Store: testStore(t, storeName)}
			h := newHarness(t, example("wf-2302"), func(c *engine.Config) { c.Store = st })
			all := evidenceCitations(t, h.eng, 12)
			for _, n := range []int{0, 1, 3, 12} {
				st.reads.Store(0)
				st.asked.Store(0)
				req := readRequest(t, example("wf-2302", "requests", "wf-2302-allow.json"))
				req.Evidence = all[:n]
				req.Arguments = map[string]any{"workflow_ref": "WF-2302", "n": float64(n)}
				rc, err := h.eng.Check(context.Background(), req)
				if err != nil {
					t.Fatalf("Check(%d citations): %v", n, err)
				}
				wantReads := int64(min(n, 1))
				if got := st.reads.Load(); got != wantReads {
					t.Errorf("Check(%d citations) made %d evidence reads, want %d", n, got, wantReads)
				}
				if got := st.asked.Load(); got != int64(n) {
					t.Errorf("Check(%d citations) asked the store for %d items, want %d", n, got, n)
				}
				if n == 0 {
					continue
				}
				if !rc.SafeToExecute {
					t.Errorf("Check(%d citations) = %s %+v, want allowed on the stored legal review", n, rc.Outcome, rc.Reasons)
				}
				sr, err := st.Record(context.Background(), "acme", rc.Metadata.RecordID)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := st.Envelope(context.Background(), "acme", sr.Record.Audit.Seq, sr.Record.Replay.ReplayPacketID)
				if err != nil {
					t.Fatal(err)
				}
				var env writ.CheckRequest
				if err := json.Unmarshal(raw, &env); err != nil {
					t.Fatal(err)
				}
				for i, c := range env.Evidence {
					if c.Resolution != writ.ResolutionResolved {
						t.Errorf("Check(%d citations): citation %d (%s:%s) resolution %q, want %q", n, i, c.Kind, c.ID, c.Resolution, writ.ResolutionResolved)
					}
				}
			}
		})
	}
}
