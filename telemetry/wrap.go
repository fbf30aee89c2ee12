package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/writhq/writ"
)

// Service wraps svc: each check is a writ.check span and, when m is not
// nil, counted in the metrics. Records are read unwrapped.
func Service(svc writ.Service, m *Metrics) writ.Service { return &service{Service: svc, m: m} }

type service struct {
	writ.Service
	m *Metrics
}

func (s *service) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	start := time.Now()
	ctx, span := startCheck(ctx, req)
	rc, err := s.Service.Check(ctx, req)
	if s.m != nil {
		took := time.Since(start)
		s.m.ObserveCheck(rc, err, took)
		if rc != nil && req != nil {
			s.m.ObserveTenantCheck(req.TenantID, took)
		}
	}
	if span.IsRecording() {
		// One SetAttributes call with the attributes in an array on the
		// stack: the span grows its attribute slice once.
		var attrs [7]attribute.KeyValue
		n := 0
		if req != nil {
			attrs[n] = attribute.String("writ.tenant_id", req.TenantID)
			n++
		}
		if rc != nil {
			attrs[n] = attribute.String("writ.decision_id", rc.DecisionID)
			attrs[n+1] = attribute.String("writ.record_id", rc.Metadata.RecordID)
			attrs[n+2] = attribute.String("writ.decision_key", rc.Metadata.DecisionKey)
			attrs[n+3] = attribute.String("writ.outcome", string(rc.Outcome))
			attrs[n+4] = attribute.Bool("writ.safe_to_execute", rc.SafeToExecute && err == nil)
			attrs[n+5] = attribute.Bool("writ.fail_closed", rc.Metadata.FailClosed)
			n += 6
		}
		span.SetAttributes(attrs[:n]...)
	}
	endSpan(span, err)
	return rc, err
}

// startCheck starts the writ.check span of req under ctx. A check whose
// request carries a trace id other than the trace of the span in ctx (its
// body set trace_id and no traceparent header came with it, so the HTTP
// span began a trace of its own) would have its record in the body's
// trace and its spans in the HTTP span's: so writ.check continues the
// body's trace instead, under a remote parent with the body's trace id
// and the span id (and flags) of the span in ctx, and links to that span.
// Its children, and the records the check seals, are then in the body's
// trace. Without a span in ctx there is no span id to continue with, and
// writ.check starts as the SDK starts a root span.
func startCheck(ctx context.Context, req *writ.CheckRequest) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if req != nil && req.TraceID != "" {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			if tid, err := trace.TraceIDFromHex(req.TraceID); err == nil && tid != sc.TraceID() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc.WithTraceID(tid))
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
					Attributes: []attribute.KeyValue{attribute.String("writ.link", "request_span")}}))
			}
		}
	}
	return tracer().Start(ctx, "writ.check", opts...)
}

// Workflows wraps w: starting a run and submitting an attempt are
// writ.run.start and writ.run.attempt spans and, when m is not nil,
// counted.
func Workflows(w writ.Workflows, m *Metrics) writ.Workflows { return &workflows{Workflows: w, m: m} }

type workflows struct {
	writ.Workflows
	m *Metrics
}

func (w *workflows) StartRun(ctx context.Context, req *writ.StartRunRequest) (*writ.Run, error) {
	ctx, span := tracer().Start(ctx, "writ.run.start")
	run, err := w.Workflows.StartRun(ctx, req)
	if run != nil {
		span.SetAttributes(attribute.String("writ.run_id", run.RunID), attribute.String("writ.workflow_id", run.WorkflowID))
		if err == nil && w.m != nil {
			w.m.runs.WithLabelValues(writ.RunActive).Inc()
		}
	}
	endSpan(span, err)
	return run, err
}

func (w *workflows) SubmitAttempt(ctx context.Context, req *writ.AttemptRequest) (*writ.StepVerdict, error) {
	ctx, span := tracer().Start(ctx, "writ.run.attempt")
	v, err := w.Workflows.SubmitAttempt(ctx, req)
	if v != nil {
		span.SetAttributes(attribute.String("writ.run_id", v.RunID), attribute.String("writ.step_id", v.StepID),
			attribute.String("writ.verdict", v.State))
		if err == nil && w.m != nil {
			w.m.verdicts.WithLabelValues(verdictLabel(v.State)).Inc()
			if status := runStatusAfter(v); status != "" {
				w.m.runs.WithLabelValues(status).Inc()
			}
		}
	}
	endSpan(span, err)
	return v, err
}

// verdictLabel bounds the verdict label to the known states.
func verdictLabel(state string) string {
	switch state {
	case writ.VerdictAccepted, writ.VerdictAcceptedWithWarnings, writ.VerdictRetry, writ.VerdictAborted, writ.VerdictEscalated:
		return state
	}
	return causeOther
}

// runStatusAfter is the status a verdict ends its run in, or "" when the
// run goes on.
func runStatusAfter(v *writ.StepVerdict) string {
	switch v.State {
	case writ.VerdictAborted:
		return writ.RunAborted
	case writ.VerdictEscalated:
		return writ.RunEscalated
	case writ.VerdictAccepted, writ.VerdictAcceptedWithWarnings:
		if v.NextStep == "" {
			return writ.RunCompleted
		}
	}
	return ""
}

// Approvals wraps a: deciding an approval is a writ.approval.decide span
// and, when m is not nil, counted.
func Approvals(a writ.Approvals, m *Metrics) writ.Approvals { return &approvals{inner: a, m: m} }

type approvals struct {
	inner writ.Approvals
	m     *Metrics
}

func (a *approvals) Approvals(ctx context.Context, q writ.ApprovalQuery) (*writ.ApprovalPage, error) {
	return a.inner.Approvals(ctx, q)
}

func (a *approvals) Approval(ctx context.Context, tenantID, approvalID string) (*writ.ApprovalRequest, error) {
	return a.inner.Approval(ctx, tenantID, approvalID)
}

func (a *approvals) DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error) {
	ctx, span := tracer().Start(ctx, "writ.approval.decide")
	if req != nil {
		span.SetAttributes(attribute.String("writ.approval_id", req.ApprovalID), attribute.String("writ.decision", req.Decision))
	}
	ar, err := a.inner.DecideApproval(ctx, req)
	if err == nil && a.m != nil && (req.Decision == writ.ApprovalApproved || req.Decision == writ.ApprovalDenied) {
		a.m.approvals.WithLabelValues(req.Decision).Inc()
	}
	endSpan(span, err)
	return ar, err
}

func (a *approvals) WithdrawApproval(ctx context.Context, req *writ.WithdrawApprovalRequest) (*writ.ApprovalRequest, error) {
	ctx, span := tracer().Start(ctx, "writ.approval.withdraw")
	if req != nil {
		span.SetAttributes(attribute.String("writ.approval_id", req.ApprovalID))
	}
	ar, err := a.inner.WithdrawApproval(ctx, req)
	if err == nil && a.m != nil {
		a.m.approvals.WithLabelValues(writ.ApprovalWithdrawn).Inc()
	}
	endSpan(span, err)
	return ar, err
}

// Lifecycle wraps l: an execution report, a resume, a decision's story
// and the decisions in flight are writ.decision.report,
// writ.decision.resume, writ.decision.story and writ.decision.in_flight
// spans, each with the tenant and decision it is about.
func Lifecycle(l writ.Lifecycle) writ.Lifecycle { return &lifecycle{inner: l} }

type lifecycle struct{ inner writ.Lifecycle }

func (l *lifecycle) ReportExecution(ctx context.Context, r *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	ctx, span := tracer().Start(ctx, "writ.decision.report")
	ack, err := l.inner.ReportExecution(ctx, r)
	if span.IsRecording() {
		if r != nil {
			span.SetAttributes(attribute.String("writ.tenant_id", r.TenantID), attribute.String("writ.decision_id", r.DecisionID),
				attribute.String("writ.execution", string(r.Status)))
		}
		if ack != nil {
			span.SetAttributes(attribute.String("writ.record_id", ack.RecordID), attribute.String("writ.status", string(ack.Status)),
				attribute.Bool("writ.repeated", ack.Repeated != ""))
		}
	}
	endSpan(span, err)
	return ack, err
}

func (l *lifecycle) Resume(ctx context.Context, r *writ.ResumeRequest) (*writ.Receipt, error) {
	ctx, span := tracer().Start(ctx, "writ.decision.resume")
	rc, err := l.inner.Resume(ctx, r)
	if span.IsRecording() {
		if r != nil {
			span.SetAttributes(attribute.String("writ.tenant_id", r.TenantID), attribute.String("writ.decision_id", r.DecisionID),
				attribute.Int64("writ.wait_ms", r.Wait.Milliseconds()))
		}
		if rc != nil {
			span.SetAttributes(attribute.String("writ.record_id", rc.Metadata.RecordID), attribute.String("writ.outcome", string(rc.Outcome)),
				attribute.Bool("writ.safe_to_execute", rc.SafeToExecute && err == nil), attribute.String("writ.repeated", rc.Metadata.Repeated))
		}
	}
	endSpan(span, err)
	return rc, err
}

func (l *lifecycle) Decision(ctx context.Context, tenantID, decisionID string) (*writ.DecisionStory, error) {
	ctx, span := tracer().Start(ctx, "writ.decision.story")
	story, err := l.inner.Decision(ctx, tenantID, decisionID)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("writ.tenant_id", tenantID), attribute.String("writ.decision_id", decisionID))
		if story != nil {
			span.SetAttributes(attribute.Int("writ.records", len(story.Records)))
		}
	}
	endSpan(span, err)
	return story, err
}

func (l *lifecycle) InFlight(ctx context.Context, q writ.InFlightQuery) (*writ.InFlightPage, error) {
	ctx, span := tracer().Start(ctx, "writ.decision.in_flight")
	page, err := l.inner.InFlight(ctx, q)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("writ.tenant_id", q.TenantID))
		if page != nil {
			span.SetAttributes(attribute.Int("writ.decisions", len(page.Decisions)))
		}
	}
	endSpan(span, err)
	return page, err
}
