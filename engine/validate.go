package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/record"
)

var (
	// tenantPattern is writ's one rule for tenant ids, which API keys
	// are held to as well.
	tenantPattern = writ.TenantIDPattern
)

const maxKeyLen = 255

// maxTraceStateLen is the longest tracestate a check keeps: the 512
// bytes W3C Trace Context asks every participant to propagate.
const maxTraceStateLen = 512

// validate checks the shape of a request: what no pack can make valid.
// Every problem is reported, each naming its field.
func validate(req *writ.CheckRequest) error {
	var ds []writ.Detail
	bad := func(field, format string, args ...any) {
		ds = append(ds, writ.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case req.TenantID == "":
		bad("tenant_id", "required")
	case !tenantPattern.MatchString(req.TenantID):
		bad("tenant_id", "must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
	}
	switch req.Actor.Type {
	case writ.ActorAgent, writ.ActorHuman, writ.ActorService:
	case "":
		bad("actor.type", "required (AGENT, HUMAN or SERVICE)")
	default:
		bad("actor.type", "must be AGENT, HUMAN or SERVICE, not %q", req.Actor.Type)
	}
	if req.Actor.ID == "" {
		bad("actor.id", "required")
	}
	switch {
	case len(req.ApprovalIDs) > 1:
		bad("approval_ids", "present at most one approval per check")
	case len(req.ApprovalIDs) == 1 && req.ApprovalIDs[0] == "":
		bad("approval_ids[0]", "must not be empty")
	}
	for i, s := range req.SubjectIDs {
		if s == "" {
			bad(fmt.Sprintf("subject_ids[%d]", i), "must not be empty")
		}
	}
	for i, e := range req.Evidence {
		if e.Kind == "" {
			bad(fmt.Sprintf("evidence[%d].kind", i), "required")
		}
		if e.ID == "" && e.JWS == "" {
			bad(fmt.Sprintf("evidence[%d].id", i), "required (an evidence id or content address; or a signed item as jws)")
		}
		if len(e.JWS) > 2*writ.MaxEvidenceItemBytes {
			bad(fmt.Sprintf("evidence[%d].jws", i), "longer than %d bytes", 2*writ.MaxEvidenceItemBytes)
		}
		if e.Resolution != "" || e.Provenance != "" || e.Issuer != "" || e.ExpiresAt != nil || e.RevokedAt != nil || e.SubjectIDs != nil {
			bad(fmt.Sprintf("evidence[%d]", i), "resolution, provenance, issuer, expires_at, revoked_at and subject_ids are set by writ when it resolves the citation; a request must not set them")
		}
	}
	if strings.HasPrefix(req.IdempotencyKey, "writ:") {
		bad("idempotency_key", "must not begin with \"writ:\", which writ keeps for its own claims")
	}
	if req.TraceID != "" && !writ.ValidTraceID(req.TraceID) {
		bad("trace_id", "must be a W3C trace id: 32 lowercase hex digits, not all zero")
	}
	if req.TraceState != "" {
		if _, err := trace.ParseTraceState(req.TraceState); err != nil || len(req.TraceState) > maxTraceStateLen {
			bad("trace_state", "must be a W3C tracestate of at most 32 key=value entries and %d bytes", maxTraceStateLen)
		}
	}
	if len(req.IdempotencyKey) > maxKeyLen {
		bad("idempotency_key", "longer than %d bytes", maxKeyLen)
	}
	if _, ok := req.Outputs["outcome"]; ok {
		bad("outputs.outcome", "is set by writ (the receipt outcome); leave it out")
	}
	if u := req.Usage; u != nil && (u.Tokens < 0 || u.ToolCalls < 0 || u.CostUSDCents < 0 || u.WallClockMS < 0) {
		bad("usage", "must not be negative")
	}
	if len(ds) == 0 {
		return nil
	}
	return &writ.Error{Code: writ.EINVALID, Message: "invalid check request: " + detailsSummary(ds), Details: ds}
}

func detailsSummary(ds []writ.Detail) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, "; ")
}

// schemaPrinter renders the schema library's messages in English.
var schemaPrinter = message.NewPrinter(language.English)

// validateOutputs checks proposed outputs against the spec's outputs
// schema: a record whose outputs break it is never written.
func validateOutputs(s *pack.Spec, outputs map[string]any) error {
	if s.OutputsSchema == nil {
		return nil
	}
	var v any = map[string]any{}
	if outputs != nil {
		v = outputs
	}
	err := s.OutputsSchema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &writ.Error{Code: writ.EINVALID, Message: "outputs: " + err.Error()}
	}
	var ds []writ.Detail
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := strings.Join(append([]string{"outputs"}, e.InstanceLocation...), ".")
		// LocalizedString is the schema library's sentence for people;
		// fmt.Sprint of a kind prints Go values (&{USD INR}).
		ds = append(ds, writ.Detail{Field: field, Message: e.ErrorKind.LocalizedString(schemaPrinter)})
	}
	walk(ve)
	return &writ.Error{Code: writ.EINVALID, Message: fmt.Sprintf("outputs do not match the outputs schema of %s: %s", s.ID(), detailsSummary(ds)), Details: ds}
}

// redactReceipt applies the pack's redaction patterns to the text of a
// receipt: messages may quote arguments.
func redactReceipt(red *record.Redactor, rc *writ.Receipt) {
	if !red.Active() {
		return
	}
	for _, list := range [][]writ.Reason{rc.Reasons, rc.SafeNextSteps} {
		for i := range list {
			list[i].Message = red.String(list[i].Message)
		}
	}
	rc.ViewerGuidance = red.Strings(rc.ViewerGuidance)
	rc.WhatWouldChangeThis = red.Strings(rc.WhatWouldChangeThis)
	rc.ResumeContract.ResumeWhen = red.Strings(rc.ResumeContract.ResumeWhen)
	for _, list := range [][]writ.Condition{rc.WhatWouldChangeThisConditions, rc.ResumeContract.ResumeWhenConditions} {
		for i := range list {
			list[i].Text = red.String(list[i].Text)
		}
	}
}

// newID returns prefix + a time-ordered, 128-bit id: 48 bits of Unix
// milliseconds and 80 random bits, in lowercase Crockford base32.
func (e *Engine) newID(prefix string, t time.Time) string {
	return prefix + crockford(e.timeOrdered(t))
}

// newTraceID draws the trace id of a request that has none: 32 lowercase
// hex digits of 48 bits of Unix milliseconds and 80 random bits, like the
// ids. Ordered by time, the ids of one group commit land side by side in
// the trace id index (one page written, not one page a record), and the
// random rightmost bits keep them unique and fit for sampling by trace id
// (W3C Trace Context asks that the rightmost 7 bytes be random).
func (e *Engine) newTraceID(t time.Time) string {
	b := e.timeOrdered(t)
	return hex.EncodeToString(b[:])
}

// timeOrdered returns t's Unix milliseconds in 6 bytes, big-endian, and
// 10 random bytes.
func (e *Engine) timeOrdered(t time.Time) [16]byte {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	// A Reader may return fewer bytes than asked without an error.
	if _, err := io.ReadFull(e.random, b[6:]); err != nil {
		panic("engine: random source failed: " + err.Error())
	}
	return b
}

const crockfordAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

func crockford(b [16]byte) string {
	// 128 bits → 26 characters, most significant first.
	var out [26]byte
	var acc uint64
	var bits uint
	j := 0
	// Left-pad to 130 bits so the 26 characters divide evenly.
	acc, bits = 0, 2
	for _, x := range b {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = crockfordAlphabet[(acc>>bits)&31]
			j++
		}
	}
	return string(out[:j])
}

// hasNUL and errNUL refuse input holding U+0000 (record.HasNUL).
var (
	hasNUL = record.HasNUL
	errNUL = record.ErrNUL
)
