package replay

import (
	"fmt"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// decideCheck resolves req under pin and decides it at now, settling the
// presented approvals as engine.Engine.Check does. Replay never sees the
// unredacted arguments, so the binding it settles approvals against has
// no keyed ArgumentsDigest: approvals compare RedactedArgumentsDigest,
// the digest of the redacted arguments, instead (see
// writ.ApprovalBinding). It is pure.
//
// The history values are the ones the record pinned, by aggregate name
// (policy.PinnedHistory): replay decides with what the decision saw, and
// checks those values against the store separately (checkHistory).
//
// The parameter values are the ones the record pinned too (pinnedParams).
func decideCheck(pin *pinned, req *writ.CheckRequest, presented []*writ.ApprovalRequest, now time.Time, pinnedHist []writ.HistoryValue, params *writ.ParamsPin) (*policy.Resolved, *policy.Decision, error) {
	return decideCheckWith(pin, req, presented, now, policy.Inputs{History: policy.PinnedHistory(pinnedHist), Params: pinnedParams(pin, params)})
}

// pinnedParams are the parameter values a record pinned, as the pack
// that decides again declares them: the pinned value of each parameter
// it declares, its default for one the record did not pin. Under the
// pinned pack that is exactly the pinned values.
func pinnedParams(pin *pinned, params *writ.ParamsPin) map[string]any {
	var set map[string]any
	if params != nil {
		set = params.Values
	}
	return pin.pol.Pack.EffectiveParams(set)
}

// decideCheckWith is decideCheck with the inputs given.
func decideCheckWith(pin *pinned, req *writ.CheckRequest, presented []*writ.ApprovalRequest, now time.Time, in policy.Inputs) (*policy.Resolved, *policy.Decision, error) {
	r, err := pin.pol.Resolve(req)
	if err != nil {
		return nil, nil, fmt.Errorf("the request does not resolve under pack %s: %w", pin.pol.Pack.ID(), err)
	}
	d := pin.pol.DecideInputs(r, req, now, in)
	if len(presented) > 0 {
		binding, err := replayBinding(pin, r, req, now)
		if err != nil {
			return nil, nil, err
		}
		d.ApplyApprovals(presented, binding, now)
	}
	return r, d, nil
}

// replayBinding is the binding of req as replay can know it: no keyed
// arguments digest.
func replayBinding(pin *pinned, r *policy.Resolved, req *writ.CheckRequest, now time.Time) (writ.ApprovalBinding, error) {
	dg, err := record.InputDigests(req, now, pin.red)
	if err != nil {
		return writ.ApprovalBinding{}, err
	}
	return record.Binding(r, dg, ""), nil
}

// rebuildCheck decides req again and builds its record with the
// recorded ids and clock: what engine.Engine.Check built.
func rebuildCheck(pin *pinned, req *writ.CheckRequest, presented []*writ.ApprovalRequest, h recordHead, envelopeHash string) (*writ.Record, error) {
	now := h.Timestamp.UTC()
	r, d, err := decideCheck(pin, req, presented, now, h.History, h.Params)
	if err != nil {
		return nil, err
	}
	rec, err := record.Build(record.Input{RecordID: h.RecordID, DecisionID: h.DecisionID, Now: now, Request: req, Resolved: r, Decision: d,
		EnvelopeHash: envelopeHash, Redactor: pin.red})
	if err != nil {
		return nil, fmt.Errorf("the record cannot be rebuilt: %w", err)
	}
	rec.History = rebuiltHistory(pin, r, req, now, h.History, pinnedParams(pin, h.Params))
	var set string
	if h.Params != nil {
		set = h.Params.Set
	}
	if rec.Params, err = record.PinParams(pinnedParams(pin, h.Params), set); err != nil {
		return nil, fmt.Errorf("the record cannot be rebuilt: %w", err)
	}
	return rec, nil
}
