package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// waiters wakes resumes waiting on approvals when this engine records an
// approval's decision. A waiter costs a channel and a map entry; nothing
// polls the store on its behalf.
type waiters struct {
	mu       sync.Mutex
	m        map[string]map[chan struct{}]struct{} // by tenant and approval id
	stopOnce sync.Once
	stopped  chan struct{} // closed by StopWaiting; made by done
}

// done returns the channel StopWaiting closes.
func (w *waiters) done() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped == nil {
		w.stopped = make(chan struct{})
	}
	return w.stopped
}

// StopWaiting ends every wait, now and later: a resume that waits, or
// would, answers at once as if its wait ran out (the blocked receipt
// again, still waiting), unless an approval is already decided. A server
// calls it before it shuts down, so that long polls do not hold the
// shutdown up.
func (e *Engine) StopWaiting() {
	ch := e.waiters.done()
	e.waiters.stopOnce.Do(func() { close(ch) })
}

func waiterKey(tenant, approvalID string) string { return tenant + "\x1f" + approvalID }

// add registers ch for the approvals ids of tenant; the returned func
// removes it.
func (w *waiters) add(tenant string, ids []string, ch chan struct{}) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	for _, id := range ids {
		k := waiterKey(tenant, id)
		if w.m[k] == nil {
			w.m[k] = map[chan struct{}]struct{}{}
		}
		w.m[k][ch] = struct{}{}
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, id := range ids {
			k := waiterKey(tenant, id)
			delete(w.m[k], ch)
			if len(w.m[k]) == 0 {
				delete(w.m, k)
			}
		}
	}
}

// notify wakes every waiter of an approval.
func (w *waiters) notify(tenant, approvalID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[waiterKey(tenant, approvalID)] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Waiting returns how many resumes wait on approvals now.
func (e *Engine) Waiting() int {
	e.waiters.mu.Lock()
	defer e.waiters.mu.Unlock()
	seen := map[chan struct{}]bool{}
	for _, chs := range e.waiters.m {
		for ch := range chs {
			seen[ch] = true
		}
	}
	return len(seen)
}

// sweep wakes the waiters of approvals decided by another server, every
// interval, until ctx is done: one read per tenant with waiters, however
// many resumes wait, and none while no resume waits.
func (e *Engine) sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.waiters.mu.Lock()
		byTenant := map[string][]string{}
		for k := range e.waiters.m {
			tenant, id, _ := strings.Cut(k, "\x1f")
			byTenant[tenant] = append(byTenant[tenant], id)
		}
		e.waiters.mu.Unlock()
		for tenant, ids := range byTenant {
			decided, err := e.store.DecidedApprovals(ctx, tenant, ids)
			if err != nil {
				e.log.Warn("reading the approvals resumes wait on", "tenant", tenant, "err", err)
				continue
			}
			for _, id := range decided {
				e.waiters.notify(tenant, id)
			}
		}
	}
}

// Resume re-decides a blocked decision's action; see writ.Lifecycle.
func (e *Engine) Resume(ctx context.Context, r *writ.ResumeRequest) (*writ.Receipt, error) {
	if e.policy == nil {
		return nil, writ.Errorf(writ.EUNAVAILABLE, "no pack is pinned: this engine serves the ledger only")
	}
	if r == nil || r.Request == nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "a resume carries the check request it resumes", Details: []writ.Detail{{Field: "request", Message: "required"}}}
	}
	if err := needTenant(r.TenantID); err != nil {
		return nil, err
	}
	var ds []writ.Detail
	if r.DecisionID == "" {
		ds = append(ds, writ.Detail{Field: "decision_id", Message: "required"})
	}
	if r.Wait < 0 || r.Wait > writ.MaxResumeWait {
		ds = append(ds, writ.Detail{Field: "wait", Message: fmt.Sprintf("must be between 0 and %s", writ.MaxResumeWait)})
	}
	req := *r.Request
	switch req.TenantID {
	case "":
		req.TenantID = r.TenantID
	case r.TenantID:
	default:
		ds = append(ds, writ.Detail{Field: "request.tenant_id", Message: "must be the decision's tenant"})
	}
	for i, ev := range req.Evidence {
		if ev.TenantID != "" && ev.TenantID != r.TenantID {
			ds = append(ds, writ.Detail{Field: fmt.Sprintf("request.evidence[%d].tenant_id", i), Message: fmt.Sprintf("evidence of tenant %q cannot support a decision of tenant %q", ev.TenantID, r.TenantID)})
		}
	}
	if req.Supersedes != "" {
		ds = append(ds, writ.Detail{Field: "request.supersedes", Message: "is set by writ: a resume supersedes the decision's latest record"})
	}
	if len(ds) > 0 {
		return nil, &writ.Error{Code: writ.EINVALID, Message: "invalid resume: " + detailsSummary(ds), Details: ds}
	}
	bound, err := bindActor(ctx, &req)
	if err != nil {
		return nil, err
	}
	req = *bound
	if err := validate(&req); err != nil {
		return nil, err
	}

	target, rc, err := e.resumable(ctx, r.TenantID, r.DecisionID)
	if err != nil {
		return nil, err
	}
	linkDecisionTrace(ctx, target.TraceID, r.DecisionID)
	if rc.SafeToExecute {
		return rc, nil
	}
	// The same action: the same decision key and the same arguments.
	res, err := e.policy.Resolve(&req)
	if err != nil {
		return nil, err
	}
	args, err := record.ArgumentsDigest(e.redactor.Map(req.Arguments))
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if res.Spec.DecisionKey != target.DecisionKey || args != target.Replay.ArgumentsDigest {
		return nil, &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("the request is not the action decision %s decided (decision key %s and the same arguments); check a new action instead", r.DecisionID, target.DecisionKey),
			Details: []writ.Detail{{Field: "request", Message: "another action"}}}
	}

	decided, err := e.decidedApproval(ctx, r.TenantID, rc.Metadata.ApprovalIDs)
	if err != nil {
		return nil, err
	}
	if decided == "" && r.Wait > 0 && len(rc.Metadata.ApprovalIDs) > 0 {
		if decided, err = e.awaitApproval(ctx, r.TenantID, rc.Metadata.ApprovalIDs, r.Wait); err != nil {
			return nil, err
		}
		if decided == "" {
			rc.Metadata.Repeated = writ.RepeatedStillWaiting
			return rc, nil
		}
	}
	if decided != "" && len(req.ApprovalIDs) == 0 {
		req.ApprovalIDs = []string{decided}
	}
	req.Supersedes = target.RecordID
	return e.check(ctx, &req, r.DecisionID)
}

// resumable reads a decision's latest check record and its receipt. A
// decision whose latest check permits is answered with that receipt
// (nothing to resume); a terminal one cannot be resumed.
func (e *Engine) resumable(ctx context.Context, tenantID, decisionID string) (*writ.Record, *writ.Receipt, error) {
	recs, err := e.store.DecisionRecords(ctx, tenantID, decisionID)
	if err != nil {
		return nil, nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision could not be read; retry", Err: err}
	}
	last, permitted := lastCheck(recs)
	if last == nil {
		return nil, nil, writ.Errorf(writ.ENOTFOUND, "decision %q not found", decisionID)
	}
	target := &last.Record
	// Only the key that made the decision, or one that may act for its
	// actor, resumes it (or learns how it stands).
	if err := writ.MayActOn(ctx, "decision "+decisionID, target.Actor); err != nil {
		return nil, nil, err
	}
	raw, err := e.storedReceipt(ctx, last)
	if writ.ErrorCode(err) == writ.EINTERNAL {
		return nil, nil, err
	} else if err != nil {
		return nil, nil, &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision's receipt could not be read; retry", Err: err}
	}
	var rc writ.Receipt
	if err := json.Unmarshal(raw, &rc); err != nil {
		return nil, nil, fmt.Errorf("stored receipt of record %s: %w", target.RecordID, err)
	}
	// A copy, so that a resume that waits holds one record, not the page
	// of the decision's records it was read with.
	rec := *target
	target = &rec
	if permitted {
		rc.Metadata.Repeated = writ.RepeatedIdempotent
		return target, &rc, nil
	}
	if rc.Outcome == writ.OutcomeGoalFailTerminal || rc.HumanReviewTerminal {
		return nil, nil, writ.Errorf(writ.ECONFLICT, "decision %s ended terminally (%s, %s); it cannot be resumed", decisionID, rc.Outcome, rc.Disposition.Mode)
	}
	return target, &rc, nil
}

// decidedApproval returns the first of ids that is decided (approved
// first, then denied or withdrawn), or "".
func (e *Engine) decidedApproval(ctx context.Context, tenantID string, ids []string) (string, error) {
	now := e.now().UTC()
	denied := ""
	for _, id := range ids {
		a, err := e.store.Approval(ctx, tenantID, id, now)
		if writ.ErrorCode(err) == writ.ENOTFOUND {
			continue
		} else if err != nil {
			return "", &writ.Error{Code: writ.EUNAVAILABLE, Message: "the decision's approvals could not be read; retry", Err: err}
		}
		switch a.State {
		case writ.ApprovalApproved:
			return id, nil
		case writ.ApprovalDenied, writ.ApprovalWithdrawn:
			if denied == "" {
				denied = id
			}
		}
	}
	return denied, nil
}

// awaitApproval waits up to wait for one of the approvals ids to be
// decided and returns it, or "" when none was.
func (e *Engine) awaitApproval(ctx context.Context, tenantID string, ids []string, wait time.Duration) (string, error) {
	ch := make(chan struct{}, 1)
	stopped := e.waiters.done()
	remove := e.waiters.add(tenantID, ids, ch)
	defer remove()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// An approval decided between the caller's read and add is seen by
	// this first read.
	for {
		if id, err := e.decidedApproval(ctx, tenantID, ids); err != nil || id != "" {
			return id, err
		}
		select {
		case <-ch:
		case <-timer.C:
			return "", nil
		case <-stopped:
			return "", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
