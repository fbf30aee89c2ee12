package verify

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/writhq/writ"
)

func TestCheckCitations(t *testing.T) {
	at := time.Date(2026, 5, 9, 9, 0, 0, 0, time.UTC)
	approval := writ.Approval{GateID: "GATE_FINANCE_APPROVAL", Approver: "lead@acme.example", EvidenceSnapshotHash: "sha256:e1", DecidedAt: at}
	grantRec := func(a writ.Approval) *writ.Record {
		return &writ.Record{DecisionKey: "approval:" + a.GateID, Status: writ.StatusDecided, Timestamp: a.DecidedAt, Approvals: []writ.Approval{a}}
	}
	citeRec := func(ts time.Time, a writ.Approval) *writ.Record {
		return &writ.Record{DecisionKey: "refund.issue", Status: writ.StatusDecided, Timestamp: ts, Approvals: []writ.Approval{a}}
	}
	other := func(f func(*writ.Approval)) writ.Approval { a := approval; f(&a); return a }
	for _, tc := range []struct {
		name  string
		chain []*writ.Record
		want  []int64 // seqs with approval_not_granted
	}{
		{"granted then redeemed", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), approval)}, nil},
		{"redeemed twice", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), approval), citeRec(at.Add(2*time.Minute), approval)}, nil},
		{"no grant", []*writ.Record{citeRec(at.Add(time.Minute), approval)}, []int64{1}},
		{"granted after", []*writ.Record{citeRec(at.Add(time.Minute), approval), grantRec(approval)}, []int64{1}},
		{"a denial grants nothing", []*writ.Record{{DecisionKey: "approval:GATE_FINANCE_APPROVAL", Status: writ.StatusRejected, Timestamp: at, Approvals: []writ.Approval{}},
			citeRec(at.Add(time.Minute), approval)}, []int64{2}},
		{"other approver", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), other(func(a *writ.Approval) { a.Approver = "mallory" }))}, []int64{2}},
		{"other gate", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), other(func(a *writ.Approval) { a.GateID = "GATE_OTHER" }))}, []int64{2}},
		{"other decision time", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), other(func(a *writ.Approval) { a.DecidedAt = at.Add(time.Second) }))}, []int64{2}},
		{"other evidence", []*writ.Record{grantRec(approval), citeRec(at.Add(time.Minute), other(func(a *writ.Approval) { a.EvidenceSnapshotHash = "sha256:e2" }))}, []int64{2}},
		{"cited before it was decided", []*writ.Record{grantRec(approval), citeRec(at.Add(-time.Minute), approval)}, []int64{2}},
	} {
		v := &tenantVerifier{tenant: "acme"}
		for i, rec := range tc.chain {
			v.checkCitations(&checked{audit: writ.Audit{Seq: int64(i + 1)}, cite: citationOf(rec)})
		}
		var got []int64
		for _, f := range v.findings {
			if f.Kind != FindingApprovalNotGranted || f.TenantID != "acme" {
				t.Errorf("%s: finding %+v", tc.name, f)
			}
			got = append(got, f.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: approval_not_granted at seqs %v, want %v: %+v", tc.name, got, tc.want, v.findings)
		}
	}
}

func TestCheckRevocationGrowth(t *testing.T) {
	const (
		one = "writ-revocations 1 sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac\n"
		two = "writ-revocations 2 sha256:907206cb99d908c14b091e0a26459738d240fb0aeb3c09022ffed83d2fe1c505\n"
		alt = "writ-revocations 1 sha256:0000000000000000000000000000000000000000000000000000000000000000\n"
	)
	cp := func(size int64, ext string) validCheckpoint {
		return validCheckpoint{size, "writ/acme\n" + itoa(size) + "\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n" + ext}
	}
	for _, tc := range []struct {
		name string
		cps  []validCheckpoint
		want []int64 // sizes with revocations_dropped
	}{
		{"none", []validCheckpoint{cp(1, ""), cp(2, "")}, nil},
		{"grows", []validCheckpoint{cp(1, ""), cp(3, one), cp(5, one), cp(8, two)}, nil},
		{"grows, listed out of order", []validCheckpoint{cp(8, two), cp(3, one)}, nil},
		{"line dropped", []validCheckpoint{cp(3, one), cp(5, "")}, []int64{5}},
		{"shrinks", []validCheckpoint{cp(3, two), cp(5, one)}, []int64{5}},
		{"replaced", []validCheckpoint{cp(3, one), cp(5, alt)}, []int64{5}},
		{"dropped, then back", []validCheckpoint{cp(3, one), cp(4, ""), cp(5, one)}, []int64{4}},
	} {
		var got []int64
		for _, f := range checkRevocationGrowth("acme", tc.cps) {
			if f.Kind != FindingRevocationsDropped {
				t.Errorf("%s: finding %+v", tc.name, f)
			}
			got = append(got, f.TreeSize)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("checkRevocationGrowth(%s) at sizes %v, want %v", tc.name, got, tc.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
