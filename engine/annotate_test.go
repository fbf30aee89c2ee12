package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/replay"
)

// TestRecordsAboutRecords seals a retraction, a feedback entry and replay
// results, and reads them back from the records they are about: the
// record's links, the decision's story, the refers_to filter; every one
// of them verifies and replays equal.
func TestRecordsAboutRecords(t *testing.T) {
	ctx := context.Background()
	clk := newClock(exampleClock)
	h := newHarness(t, example("refund"), withClock(clk))
	allowed, err := h.eng.Check(ctx, refundRequest(t, "refund-allow"))
	if err != nil || !allowed.SafeToExecute {
		t.Fatalf("Check(refund-allow) = %+v, %v", allowed, err)
	}
	frozen, err := h.eng.Check(ctx, refundRequest(t, "refund-account-frozen-goal-fail"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)

	for _, tc := range []struct {
		name string
		req  writ.RetractRequest
		code string
	}{
		{"no reason", writ.RetractRequest{TenantID: "acme", RecordID: frozen.Metadata.RecordID, By: "auditor_1"}, writ.EINVALID},
		{"no one", writ.RetractRequest{TenantID: "acme", RecordID: frozen.Metadata.RecordID, Reason: "wrong"}, writ.EINVALID},
		{"unknown record", writ.RetractRequest{TenantID: "acme", RecordID: "dr_nope", By: "auditor_1", Reason: "wrong"}, writ.ENOTFOUND},
		{"another tenant's", writ.RetractRequest{TenantID: "other", RecordID: frozen.Metadata.RecordID, By: "auditor_1", Reason: "wrong"}, writ.ENOTFOUND},
	} {
		if _, err := h.eng.Retract(ctx, &tc.req); writ.ErrorCode(err) != tc.code {
			t.Errorf("Retract(%s) = %v, want %s", tc.name, err, tc.code)
		}
	}
	before := h.count(t, "acme")
	if before != 2 {
		t.Fatalf("%d records after refused retractions, want the 2 checks", before)
	}
	ret, err := h.eng.Retract(ctx, &writ.RetractRequest{TenantID: "acme", RecordID: frozen.Metadata.RecordID, By: "auditor_1", Reason: "decided on a stale fraud score"})
	if err != nil || ret.Kind != writ.StoryRetraction || ret.Status != writ.StatusClosed || ret.About != frozen.Metadata.RecordID || ret.DecisionID != frozen.DecisionID {
		t.Fatalf("Retract = %+v, %v", ret, err)
	}
	if _, err := h.eng.Retract(ctx, &writ.RetractRequest{TenantID: "acme", RecordID: frozen.Metadata.RecordID, By: "auditor_2", Reason: "again"}); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("a second retraction = %v, want %s", err, writ.ECONFLICT)
	}
	if _, err := h.eng.Retract(ctx, &writ.RetractRequest{TenantID: "acme", RecordID: ret.RecordID, By: "auditor_2", Reason: "retract the retraction"}); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("retracting a retraction = %v, want %s", err, writ.ECONFLICT)
	}

	bad := 1.5
	if _, err := h.eng.Feedback(ctx, &writ.FeedbackRequest{TenantID: "acme", RecordID: allowed.Metadata.RecordID, Author: "lead_1", Label: "x", Score: &bad}); writ.ErrorCode(err) != writ.EINVALID {
		t.Errorf("Feedback(score 1.5) = %v, want %s", err, writ.EINVALID)
	}
	score := 0.25
	fb, err := h.eng.Feedback(ctx, &writ.FeedbackRequest{TenantID: "acme", RecordID: allowed.Metadata.RecordID, Author: "lead_1", Label: "wrong_outcome", Score: &score,
		Comment: "should have escalated", RuleChange: "ctxpack.support@1.1.0"})
	if err != nil || fb.Kind != writ.StoryFeedback || fb.Outcome != "wrong_outcome" || fb.Status != writ.StatusDecided {
		t.Fatalf("Feedback = %+v, %v", fb, err)
	}

	// Replay everything, and record each result.
	rp := replay.New(h.store, replay.Options{})
	sum, err := rp.Tenant(ctx, "acme", func(res *replay.Result) error {
		if res.Status != replay.StatusEqual {
			t.Errorf("replay of %s (%s) = %+v", res.RecordID, res.Kind, res)
		}
		_, err := h.eng.RecordReplay(ctx, res)
		return err
	})
	if err != nil || int64(sum.Records) != 4+h.onFile["acme"] {
		t.Fatalf("replay = %+v, %v; want 4 records besides the %d that put evidence on file", sum, err, h.onFile["acme"])
	}

	links, err := h.eng.Links(ctx, "acme", frozen.Metadata.RecordID)
	if err != nil || !links.Retracted || links.RetractedBy != ret.RecordID || !slices.Equal(links.SupersededBy, []string{ret.RecordID}) ||
		links.Replay == nil || links.Replay.LastStatus != writ.ReplayEqual || links.Replay.Replays != 1 {
		t.Errorf("Links(retracted) = %+v, %v", links, err)
	}
	links, err = h.eng.Links(ctx, "acme", allowed.Metadata.RecordID)
	if err != nil || links.Retracted || len(links.SupersededBy) != 0 || !slices.Equal(links.Feedback, []string{fb.RecordID}) || links.Replay == nil {
		t.Errorf("Links(allowed) = %+v, %v", links, err)
	}
	// A replay result's own replay is not recorded.
	page, err := h.store.Records(ctx, writ.RecordQuery{TenantID: "acme", RefersTo: allowed.Metadata.RecordID})
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("Records(refers_to) = %v, %v; want the feedback and the replay", page, err)
	}
	last := page.Records[1].Record
	if last.DecisionKey != writ.ReplayKeyPrefix+"support.refund.execute" {
		t.Fatalf("the last record about the allowed check is %s, want its replay", last.DecisionKey)
	}
	res, err := rp.Record(ctx, "acme", last.RecordID)
	if err != nil || res.Status != replay.StatusEqual {
		t.Errorf("replay of a replay result = %+v, %v", res, err)
	}
	if _, err := h.eng.RecordReplay(ctx, res); writ.ErrorCode(err) != writ.ECONFLICT {
		t.Errorf("recording a replay result's replay = %v, want %s", err, writ.ECONFLICT)
	}

	st, err := h.eng.Decision(ctx, "acme", frozen.DecisionID)
	if err != nil || !st.State.Retracted {
		t.Fatalf("Decision(frozen) = %+v, %v; want retracted", st, err)
	}
	var kinds []string
	for _, r := range st.Records {
		kinds = append(kinds, r.Kind)
	}
	if !slices.Equal(kinds, []string{writ.StoryCheck, writ.StoryRetraction, writ.StoryReplayResult, writ.StoryReplayResult}) {
		t.Errorf("story kinds = %v", kinds)
	}
	if r := st.Records[0]; !r.Retracted || !slices.Equal(r.SupersededBy, []string{ret.RecordID}) || r.LastReplay == nil {
		t.Errorf("the retracted check in its story = %+v", r)
	}
	if r := st.Records[1]; r.Supersedes != frozen.Metadata.RecordID {
		t.Errorf("the retraction in the story supersedes %q", r.Supersedes)
	}

	// Every record, those about records too, replays equal and verifies.
	sum, err = rp.Tenant(ctx, "acme", nil)
	// Besides the 8, each evidence record on file and its replay result.
	if err != nil || sum.Equal != sum.Records || int64(sum.Records) != 8+2*h.onFile["acme"] {
		t.Errorf("replay of every record = %+v, %v", sum, err)
	}
	h.verify(t)
}
