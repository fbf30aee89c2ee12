package engine_test

import (
	"context"
	"testing"

	"github.com/writhq/writ"
)

// TestNULRefused: text holding U+0000 is refused before anything is
// written (PostgreSQL cannot keep it as text, and one such record would
// fail the whole group commit), while a literal backslash-u sequence in
// text is fine.
func TestNULRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("refund"), withClock(newClock(exampleClock)))
	for _, tt := range []struct {
		name string
		mut  func(*writ.CheckRequest)
		code string
	}{
		{"argument", func(r *writ.CheckRequest) { r.Arguments["note"] = "a\x00b" }, writ.EINVALID},
		{"subject", func(r *writ.CheckRequest) { r.SubjectIDs = append(r.SubjectIDs, "x\x00") }, writ.EINVALID},
		{"context key", func(r *writ.CheckRequest) { r.Context["k\x00"] = 1 }, writ.EINVALID},
		{"literal backslash-u0000 text", func(r *writ.CheckRequest) { r.Arguments["note"] = `C:\u0000` }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := h.count(t, "acme")
			req := refundRequest(t, "refund-allow")
			req.IdempotencyKey = ""
			tt.mut(req)
			_, err := h.eng.Check(ctx, req)
			if code := writ.ErrorCode(err); code != tt.code {
				t.Fatalf("error %v (code %q), want %q", err, code, tt.code)
			}
			if after := h.count(t, "acme"); tt.code != "" && after != before {
				t.Errorf("a refused check wrote %d records", after-before)
			}
		})
	}
	_, a := askApproval(t, h, highValue(t))
	_, err := h.eng.DecideApproval(ctx, &writ.DecideApprovalRequest{TenantID: "acme", ApprovalID: a.ApprovalID, Decision: writ.ApprovalApproved, Approver: "fin", Reason: "ok\x00"})
	if writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("a reason with NUL: %v, want invalid", err)
	}
}

// TestNULRefusedInAttempts: a step attempt holding U+0000 is refused and
// does not count.
func TestNULRefusedInAttempts(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, example("storybook"))
	run := startStorybookRun(t, h)
	before := h.count(t, "acme")
	req := attemptReq(run, "visual_check", badResult)
	req.Result = map[string]any{"note": "x\x00y"}
	if _, err := h.eng.SubmitAttempt(ctx, req); writ.ErrorCode(err) != writ.EINVALID {
		t.Fatalf("attempt with NUL: %v, want invalid", err)
	}
	if after := h.count(t, "acme"); after != before {
		t.Errorf("a refused attempt wrote %d records", after-before)
	}
	v, err := h.eng.SubmitAttempt(ctx, attemptReq(run, "visual_check", badResult))
	if err != nil || v.AttemptsUsed != 1 {
		t.Errorf("the next attempt = %+v, %v; want it counted as the first", v, err)
	}
}
