package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/acceptance"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// Rebuilder rebuilds the records of step verdicts and approval decisions
// from their pinned inputs, with the very code that built them when they
// were decided: replay compares what it rebuilds with what was sealed.
// Check records need no Rebuilder: their loop is policy.Resolve,
// policy.Decide, ApplyApprovals and record.Build, all exported and pure.
//
// A Rebuilder does no I/O: its caller reads the inputs (envelopes, run
// events, approval requests) and hands them in. It is safe for
// concurrent use.
type Rebuilder struct {
	e *Engine
	// lenient rebuilds verdicts decided before issue 31, under the
	// defaults they were decided with (acceptance.Options.Lenient).
	lenient *Engine
}

// NewRebuilder returns a Rebuilder for records sealed under pol's pack.
func NewRebuilder(pol *policy.Policy) (*Rebuilder, error) {
	b := &Rebuilder{}
	for _, lenient := range []bool{false, true} {
		contracts, err := acceptance.CompileWith(pol.Pack, acceptance.Options{Lenient: lenient})
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		e := &Engine{
			policy: pol, contracts: contracts, redactor: record.NewRedactor(pol.Pack.Controls.Redaction),
			// The ids a rebuild draws are replaced by the recorded ones.
			random: zeroes{}, now: func() time.Time { return time.Time{} },
		}
		if lenient {
			b.lenient = e
		} else {
			b.e = e
		}
	}
	return b, nil
}

// Verdict rebuilds the record of a step verdict: req is the attempt as
// stored (its envelope, which carries the trace id), events are the
// run's events before the verdict's own, and recordID, decisionID and
// now are the recorded ones. The verdict is evaluated again from the run
// folded from events, as SubmitAttempt evaluated it. lenient rebuilds a
// verdict decided before issue 31 (its record's outputs have no
// claimed_calls) under the defaults it was decided with.
func (b *Rebuilder) Verdict(events []ledger.RunEvent, req *writ.AttemptRequest, recordID, decisionID string, now time.Time, lenient bool) (*writ.Record, *writ.StepVerdict, error) {
	e := b.e
	if lenient {
		e = b.lenient
	}
	if req.TraceID == "" {
		return nil, nil, fmt.Errorf("the attempt has no trace id; a stored attempt always has one")
	}
	st, err := e.foldRun(req.TenantID, req.RunID, events)
	if err != nil {
		return nil, nil, err
	}
	if st.run == nil {
		return nil, nil, fmt.Errorf("run %s has no events before the verdict", req.RunID)
	}
	w, err := e.workflow(st.run.WorkflowID)
	if err != nil {
		return nil, nil, err
	}
	if w.Step(req.StepID) == nil {
		return nil, nil, fmt.Errorf("workflow %s has no step %q", w.WorkflowID, req.StepID)
	}
	v, err := e.evaluate(req, w, st)
	if err != nil {
		return nil, nil, err
	}
	v.DecisionID, v.RecordID = decisionID, recordID
	rec, _, err := e.verdictRecord(req, w, st, v, now)
	if err != nil {
		return nil, nil, err
	}
	return rec, v, nil
}

// ApprovalDecision rebuilds the record of an approval or a denial: req is
// the decision as stored (its envelope), a the approval request it
// decided (only its fixed fields are read: gate, binding, subjects, the
// record that asked), and recordID, decisionID and now the recorded ones.
func (b *Rebuilder) ApprovalDecision(req *writ.DecideApprovalRequest, a *writ.ApprovalRequest, recordID, decisionID string, now time.Time) (*writ.Record, error) {
	if req.TraceID == "" {
		return nil, fmt.Errorf("the approval decision has no trace id; a stored one always has one")
	}
	if strings.TrimSpace(req.Approver) == "" {
		return nil, fmt.Errorf("the approval decision names no approver")
	}
	rec, _, err := b.e.approvalRecord(req, a, now)
	if err != nil {
		return nil, err
	}
	rec.RecordID, rec.DecisionID = recordID, decisionID
	return rec, nil
}

// ExecutionReport rebuilds the record of an execution report: req is the
// report as stored (its envelope), target the record it reports for, and
// recordID and now the recorded ones. place is where the report's call
// went in its tool transcript, as replay reads it back (nil for a record
// sealed before tool transcripts, which carries no entry).
func (b *Rebuilder) ExecutionReport(req *writ.ExecutionReport, target *writ.Record, recordID string, now time.Time, place *TranscriptPlace) (*writ.Record, error) {
	if req.TraceID == "" {
		return nil, fmt.Errorf("the execution report has no trace id; a stored one always has one")
	}
	rec, _, err := b.e.executionRecord(req, target, now)
	if err != nil {
		return nil, err
	}
	if place != nil {
		if err := AddTranscript(rec, req, target, place); err != nil {
			return nil, err
		}
	}
	rec.RecordID = recordID
	return rec, nil
}

// zeroes reads zero bytes: a rebuild's drawn ids are discarded.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// ParamsChange rebuilds the record of a tenant's parameter change from
// its stored request envelope: the record SetParams sealed, with the
// recorded id and clock. prev is the change it replaced ("" for none).
func (b *Rebuilder) ParamsChange(envelope []byte, recordID, prev string, now time.Time) (*writ.Record, error) {
	p := b.e.policy.Pack
	return ParamsRecord(p, recordID, envelope, prev, now, redactionIDs(p))
}

// Evidence rebuilds an evidence record (decision key "evidence:<kind>")
// or an evidence revocation record from its envelope.
func (b *Rebuilder) Evidence(envelope []byte, decisionKey, recordID string, now time.Time) (*writ.Record, error) {
	p := b.e.policy.Pack
	if strings.HasPrefix(decisionKey, ledger.EvidenceRevocationKeyPrefix) {
		return EvidenceRevocationRecord(p, recordID, envelope, now)
	}
	return EvidenceRecord(p, recordID, envelope, now)
}
