package packtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// compareCheck compares what a check answered with a case's
// expectations, field by field.
func (r *caseRun) compareCheck(prefix string, expect []pack.Expectation, d decided, reqPos pack.Pos) {
	for _, e := range expect {
		if e.Field == "error" {
			if d.err == nil {
				r.fail(e.Pos, prefix+"error", e.Want, fmt.Sprintf("no error: the check answered outcome %s", d.rc.Outcome))
			} else if !strings.Contains(describe(d.err), e.Want.(string)) {
				r.fail(e.Pos, prefix+"error", e.Want, describe(d.err))
			}
			continue
		}
		if d.err != nil {
			r.fail(reqPos, prefix+"error", "a receipt", "refused: "+describe(d.err))
			return
		}
		if e.Field == "stored" {
			continue // compareStored
		}
		if e.Field == "record" {
			r.compareRecord(prefix, e, d)
			continue
		}
		got, ok := checkField(e.Field, d)
		if !ok {
			r.fail(e.Pos, prefix+e.Field, e.Want, "nothing (the check has no decision record)")
			continue
		}
		if !equal(e.Want, got) {
			r.fail(e.Pos, prefix+e.Field, normalize(e.Want), got)
		}
	}
}

// checkField is the value of an expectable field of a check's answer.
func checkField(field string, d decided) (any, bool) {
	rc := d.rc
	codes := func(rs []writ.Reason) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.Code)
		}
		return out
	}
	switch field {
	case "outcome":
		return string(rc.Outcome), true
	case "safe_to_execute":
		return rc.SafeToExecute, true
	case "disposition":
		return string(rc.Disposition.Mode), true
	case "must_not_retry_same_action":
		return rc.MustNotRetrySameAction, true
	case "human_review_terminal":
		return rc.HumanReviewTerminal, true
	case "reasons":
		return codes(rc.Reasons), true
	case "safe_next_steps":
		return codes(rc.SafeNextSteps), true
	case "what_would_change_this":
		return append([]string{}, rc.WhatWouldChangeThis...), true
	case "target_hint":
		return rc.Routing.TargetHint, true
	case "fired":
		if d.rec == nil {
			return nil, false
		}
		return firedIDs(d.rec.PolicyDecisions), true
	case "status":
		if d.rec == nil {
			return nil, false
		}
		return string(d.rec.Status), true
	case "evidence_refs":
		if d.rec == nil {
			return nil, false
		}
		return append([]string{}, d.rec.EvidenceRefs...), true
	}
	return fmt.Sprintf("(writ test does not know the field %q)", field), true
}

// firedIDs are the ids of the checks that fired: every policy decision
// whose verdict is not allow.
func firedIDs(pds []writ.PolicyDecision) []string {
	out := []string{}
	for _, pd := range pds {
		if pd.Verdict != "allow" {
			for _, id := range pd.RuleIDs {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

// compareAttempt compares a step verdict (or the error that refused the
// attempt) and the run's status after it with the attempt's
// expectations.
func (r *caseRun) compareAttempt(prefix string, a *pack.TestAttempt, v *writ.StepVerdict, status string, err error) {
	for _, e := range a.Expect {
		if e.Field == "error" {
			if err == nil {
				r.fail(e.Pos, prefix+"error", e.Want, "no error: the verdict is "+v.State)
			} else if !strings.Contains(describe(err), e.Want.(string)) {
				r.fail(e.Pos, prefix+"error", e.Want, describe(err))
			}
			continue
		}
		if err != nil {
			r.fail(a.Pos, prefix+"error", "a verdict", "refused: "+describe(err))
			return
		}
		var got any
		switch e.Field {
		case "state":
			got = v.State
		case "attempts_used":
			got = v.AttemptsUsed
		case "attempts_left":
			got = v.AttemptsLeft
		case "retry_prompt":
			got = v.RetryPrompt
		case "retry_after_ms":
			got = v.RetryAfterMS
		case "next_step":
			got = v.NextStep
		case "escalate_to":
			got = v.EscalateTo
		case "failed":
			failed := []string{}
			for _, c := range v.Failed {
				failed = append(failed, c.Target)
			}
			got = failed
		case "run_status":
			got = status
		default:
			got = fmt.Sprintf("(writ test does not know the field %q)", e.Field)
		}
		if !equal(e.Want, got) {
			r.fail(e.Pos, prefix+e.Field, normalize(e.Want), got)
		}
	}
}

// equal compares a wanted value (JSON data model) with a got value.
// Lists compare as sets: the order of reasons or fired checks is not a
// policy owner's concern, nor is a code writ lists twice (two next steps
// of one code, with different messages).
func equal(want, got any) bool {
	switch w := want.(type) {
	case []any:
		g, ok := got.([]string)
		if !ok {
			return false
		}
		ws := make([]string, 0, len(w))
		for _, x := range w {
			s, _ := x.(string)
			ws = append(ws, s)
		}
		gs := slices.Clone(g)
		slices.Sort(ws)
		slices.Sort(gs)
		return slices.Equal(slices.Compact(ws), slices.Compact(gs))
	case json.Number:
		switch g := got.(type) {
		case int:
			return w.String() == strconv.Itoa(g)
		case int64:
			return w.String() == strconv.FormatInt(g, 10)
		}
		return false
	default:
		return want == got
	}
}

// normalize makes a wanted value print like a got one.
func normalize(want any) any {
	switch w := want.(type) {
	case []any:
		out := make([]string, 0, len(w))
		for _, x := range w {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	case json.Number:
		if i, err := w.Int64(); err == nil {
			return i
		}
	}
	return want
}
