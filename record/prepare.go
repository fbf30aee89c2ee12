package record

import (
	"encoding/json"
	"io"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/policy"
)

// Check is what a boundary check is prepared from (Prepare).
type Check struct {
	// Received is the request as the caller sent it, its actor bound:
	// the keyed digests bind it, its evidence as cited.
	Received *writ.CheckRequest
	// Request is the request as it is decided: its trace id filled in
	// and its cited evidence resolved. The envelope stores it.
	Request  *writ.CheckRequest
	Resolved *policy.Resolved
	// Now is the clock reading the check is decided at.
	Now      time.Time
	Redactor *Redactor
	Binder   *Binder
	// Random draws the salts of classified values' commitments.
	Random io.Reader
}

// Prepared is a check ready to be decided: what its record, its
// approvals, its idempotency claim and its block are bound to.
type Prepared struct {
	// Envelope is the request as stored (Request, redacted, classified
	// values committed), and EnvelopeHash its content address.
	Envelope     []byte
	EnvelopeHash string
	// Sealed are the classified values the envelope commits to, for the
	// classified store.
	Sealed []Sealed
	// Digests are the digests of the redacted inputs at Now, and Binding
	// what an approval of the check binds.
	Digests Digests
	Binding writ.ApprovalBinding
	// ArgsDigest is the Binder's digest of the unredacted arguments (an
	// idempotency key's claim), ActionDigest that of the whole action as
	// received (a block's).
	ArgsDigest   string
	ActionDigest string
}

// Prepare encodes and digests a check before it is decided: its stored
// envelope, which must hold no NUL and, with what decide sees, stay
// within policy.MaxInputBytes; the digests its record carries; and the
// keyed digests and approval binding it is held to. Every error is the
// caller's (EINVALID, ETOOLARGE): nothing is decided or written.
func Prepare(c Check) (*Prepared, error) {
	envelope, sealed, err := ClassifiedEnvelope(c.Request, c.Redactor, c.Random)
	if err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if HasNUL(envelope) {
		return nil, ErrNUL
	}
	size := len(envelope)
	if c.Redactor.Active() {
		// Redaction shortens what is stored; the bound is on what decide sees.
		if raw, err := json.Marshal(c.Request); err == nil {
			size = len(raw)
		}
	}
	if size > policy.MaxInputBytes {
		// Conditions are proven cheap for inputs up to this size (see
		// policy.MaxInputBytes); larger ones are refused, not evaluated.
		return nil, writ.Errorf(writ.ETOOLARGE, "the check request is %d bytes; the limit is %d", size, policy.MaxInputBytes)
	}
	p := &Prepared{Envelope: envelope, EnvelopeHash: Digest(envelope), Sealed: sealed}
	if p.ArgsDigest, err = c.Binder.Arguments(c.Received.Arguments); err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if p.ActionDigest, err = c.Binder.Action(c.Received, c.Resolved.Spec.DecisionKey); err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	if p.Digests, err = InputDigests(c.Request, c.Now, c.Redactor); err != nil {
		return nil, &writ.Error{Code: writ.EINVALID, Message: err.Error()}
	}
	p.Binding = Binding(c.Resolved, p.Digests, p.ArgsDigest)
	return p, nil
}
