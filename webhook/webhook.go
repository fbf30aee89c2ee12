// Package webhook announces new approval requests to a pack's webhook
// (approvals.webhook in the pack), so that approvers hear of a request
// without polling for it.
//
// A [Notifier] is a courier, never a source of truth: every approval
// request it announces is already durable in the store and listed by the
// API, so a delivery that fails is logged and nothing more. The notifier
// must never block the check that created the request, and it never logs
// the secret or a body. It uses only the standard library.
//
// # Wire format
//
// Each announcement is one delivery, attempted up to Config.MaxAttempts
// times. Every attempt is this HTTP request:
//
//	POST <url>
//	Content-Type: application/json
//	Writ-Delivery: <delivery id>
//	Writ-Signature: t=<timestamp>,v1=<signature>
//
//	{"type":"approval.requested","delivery_id":"<delivery id>","approval":<approval>}
//
// A request that is approved, denied or withdrawn (by the agent that
// asked, POST /v1/approvals/{id}/withdraw) is announced again, as
//
//	{"type":"approval.decided","delivery_id":"<delivery id>","approval":<approval>}
//
// where <approval> now carries its state ("approved", "denied" or
// "withdrawn") and the event that decided it, so an orchestrator can resume the decision that asked
// (POST /v1/decisions/{decision_id}/resume, decision_id being the
// approval's) without holding a connection open.
//
// <approval> is the JSON encoding of writ.ApprovalRequest, the object the
// API returns for the request (GET /v1/approvals/{id}), with every list an
// array, never null; receivers must ignore members they do not know. <delivery id> is an opaque string of ASCII letters and digits,
// at most 64 bytes; it is the same in the header, in the body and in every
// attempt of a delivery, so receivers deduplicate on it. The body bytes are
// the same in every attempt too.
//
// <timestamp> is the attempt's time in whole seconds since the Unix epoch,
// in decimal ASCII digits. <signature> is the lowercase hexadecimal
// encoding (64 characters) of
//
//	HMAC-SHA256(key = secret, message = <timestamp> "." <body>)
//
// where secret is the bytes of the secret, as given (the value of the
// environment variable that the pack's secret_env names; it is not decoded
// from hex or base64), and the message is the timestamp's digits, one
// full stop (0x2E), and the body exactly as sent, byte for byte. Each
// attempt is signed anew, with its own timestamp.
//
// To verify a delivery, as [Verify] does, a receiver
//
//  1. splits Writ-Signature on "," into fields of the form key "=" value
//     (splitting each at its first "="), takes the timestamp from the one
//     field whose key is "t", takes the value of every field whose key is
//     "v1" as a candidate signature, and ignores fields with other keys;
//  2. rejects the delivery unless the timestamp is within its tolerance of
//     its own clock, in either direction (five minutes is usual): this
//     bounds how long a captured delivery can be replayed;
//  3. computes the signature over the raw body it received and accepts the
//     delivery only if it equals a candidate, comparing in constant time;
//  4. only then parses the body, and deduplicates on the delivery id.
//
// The format is versioned by name: a change a receiver could not safely
// ignore gets a new event type or a new signature key ("v2"), never a new
// meaning for an existing one.
//
// # Responses
//
// A 2xx status means delivered. Statuses 408, 429 and 5xx, and failures
// without a response (a refused connection, a timeout), are retried after
// an exponential backoff with full jitter: after the nth failed attempt,
// a uniformly random delay between 0 and min(MaxDelay, BaseDelay·2^(n-1)).
// When such a response carries Retry-After (delta-seconds or an HTTP
// date), the notifier waits that long instead, but never more than
// MaxDelay. Any other status is a permanent failure, logged and not
// retried: other 4xx statuses, and 3xx, since the default client follows
// no redirects. The response body is read and ignored.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writhq/writ"
)

// EventApprovalRequested is the type of the announcement of a new approval
// request.
const EventApprovalRequested = "approval.requested"

// EventApprovalDecided is the type of the announcement that an approval
// request was approved or denied.
const EventApprovalDecided = "approval.decided"

// Header names of a delivery.
const (
	DeliveryHeader  = "Writ-Delivery"
	SignatureHeader = "Writ-Signature"
)

// MinSecretSize is the least number of bytes a secret may have.
const MinSecretSize = 32

// workers is how many deliveries are in flight at once: a slow or hung
// endpoint holds at most this many, and the rest wait in the queue.
const workers = 4

// Defaults of Config.
const (
	defaultTimeout     = 10 * time.Second
	defaultMaxAttempts = 10
	defaultBaseDelay   = time.Second
	defaultMaxDelay    = 5 * time.Minute
	defaultQueueSize   = 1024
)

// Config configures a Notifier. Zero fields take their defaults.
type Config struct {
	// URL receives the deliveries: an https URL, or an http URL to a
	// loopback host (for development).
	URL string
	// Secret keys the signatures; at least MinSecretSize bytes. New
	// copies it.
	Secret []byte
	// Client sends the deliveries. The default has a 10-second timeout
	// and follows no redirects. A client without a Timeout lets a hung
	// endpoint hold a worker until Run's context ends.
	Client *http.Client
	// Logger receives delivery failures (default slog.Default()).
	Logger *slog.Logger
	// MaxAttempts caps the attempts of one delivery (default 10).
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff between attempts; see the
	// package documentation (defaults 1s and 5m).
	BaseDelay, MaxDelay time.Duration
	// QueueSize is how many announcements may wait for a worker (default
	// 1024). Announcements beyond it are dropped, with an error log.
	QueueSize int
	// Now reads the clock that signatures and Retry-After dates use
	// (default time.Now).
	Now func() time.Time
	// Sleep waits between attempts: it returns nil after d, or ctx.Err()
	// as soon as ctx ends. The default uses a timer; tests replace it to
	// observe delays without waiting for them.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Notifier delivers announcements of new approval requests to one webhook.
// Announce queues them; Run delivers them until its context ends.
type Notifier struct {
	url         string
	secret      []byte
	client      *http.Client
	log         *slog.Logger
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error

	queue   chan *delivery
	ran     atomic.Bool
	mu      sync.RWMutex // guards stopped against Announce's sends
	stopped bool         // Run has returned: nothing more is delivered
}

// delivery is one announcement, encoded once so that every attempt sends
// the same body.
type delivery struct {
	id         string
	approvalID string
	tenantID   string
	body       []byte
}

// New returns a notifier for cfg. It delivers nothing until Run is called.
func New(cfg Config) (*Notifier, error) {
	if err := checkURL(cfg.URL); err != nil {
		return nil, err
	}
	if len(cfg.Secret) < MinSecretSize {
		return nil, fmt.Errorf("webhook: the secret has %d bytes; it needs at least %d", len(cfg.Secret), MinSecretSize)
	}
	if cfg.MaxAttempts < 0 || cfg.BaseDelay < 0 || cfg.MaxDelay < 0 || cfg.QueueSize < 0 {
		return nil, errors.New("webhook: MaxAttempts, BaseDelay, MaxDelay and QueueSize must not be negative")
	}
	n := &Notifier{
		url:         cfg.URL,
		secret:      bytes.Clone(cfg.Secret),
		client:      cfg.Client,
		log:         cfg.Logger,
		maxAttempts: cmp.Or(cfg.MaxAttempts, defaultMaxAttempts),
		baseDelay:   cmp.Or(cfg.BaseDelay, defaultBaseDelay),
		maxDelay:    cmp.Or(cfg.MaxDelay, defaultMaxDelay),
		now:         cfg.Now,
		sleep:       cfg.Sleep,
		queue:       make(chan *delivery, cmp.Or(cfg.QueueSize, defaultQueueSize)),
	}
	if n.baseDelay > n.maxDelay {
		return nil, fmt.Errorf("webhook: BaseDelay %v exceeds MaxDelay %v", n.baseDelay, n.maxDelay)
	}
	if n.client == nil {
		n.client = &http.Client{
			Timeout: defaultTimeout,
			// A webhook that redirects is misconfigured; following a
			// redirect would also turn the POST into a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.sleep == nil {
		n.sleep = sleep
	}
	return n, nil
}

// checkURL accepts https URLs, and http URLs to loopback hosts: approval
// requests and their signatures must not cross a network in the clear.
func checkURL(raw string) error {
	if raw == "" {
		return errors.New("webhook: URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return errors.New("webhook: URL must be an absolute http(s) URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
		return errors.New("webhook: an http URL must name a loopback host; use https")
	}
	return fmt.Errorf("webhook: URL scheme %q is not http or https", u.Scheme)
}

// Announce queues the announcement of a new approval request and returns
// at once; it is the engine's Announce hook. When the queue is full, or
// Run has returned, it drops the announcement with an error log naming
// the approval: the request itself stays safe in the store.
func (n *Notifier) Announce(a *writ.ApprovalRequest) {
	n.announce(EventApprovalRequested, a)
}

// AnnounceDecided queues the announcement that an approval request was
// approved, denied or withdrawn, like Announce; it is the engine's AnnounceDecided
// hook.
func (n *Notifier) AnnounceDecided(a *writ.ApprovalRequest) {
	n.announce(EventApprovalDecided, a)
}

func (n *Notifier) announce(event string, a *writ.ApprovalRequest) {
	if a == nil {
		return
	}
	d, err := newDelivery(event, a)
	if err != nil {
		n.log.Error("webhook announcement dropped", "approval_id", a.ApprovalID, "tenant", a.TenantID, "reason", "cannot encode", "err", err)
		return
	}
	reason := ""
	n.mu.RLock()
	if n.stopped {
		reason = "notifier stopped"
	} else {
		select {
		case n.queue <- d:
		default:
			reason = "queue full"
		}
	}
	n.mu.RUnlock()
	if reason != "" {
		n.drop(d, reason)
	}
}

// newDelivery encodes the announcement of a under a fresh delivery id. It
// encodes at once, so the caller may reuse a, and every attempt sends the
// same bytes.
func newDelivery(event string, a *writ.ApprovalRequest) (*delivery, error) {
	d := &delivery{id: cryptorand.Text(), approvalID: a.ApprovalID, tenantID: a.TenantID}
	// Lists are arrays on the wire, never null, as the API has them.
	c := *a
	c.Binding.BundleRevisions = nonNil(c.Binding.BundleRevisions)
	c.SubjectIDs = nonNil(c.SubjectIDs)
	c.Reasons = nonNil(c.Reasons)
	c.Events = nonNil(c.Events)
	var err error
	d.body, err = json.Marshal(struct {
		Type       string                `json:"type"`
		DeliveryID string                `json:"delivery_id"`
		Approval   *writ.ApprovalRequest `json:"approval"`
	}{event, d.id, &c})
	return d, err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// drop logs an announcement that will not be delivered.
func (n *Notifier) drop(d *delivery, reason string) {
	n.log.Error("webhook announcement dropped", "approval_id", d.approvalID, "tenant", d.tenantID, "delivery_id", d.id, "reason", reason)
}

// Run delivers queued announcements, a few at a time, until ctx ends. It
// then stops the deliveries in flight, logs every announcement it did not
// deliver, and returns; announcements after that are dropped, with an
// error log. There is no Close: cancel ctx and wait for Run to return.
// Run may be called once; a second call panics.
func (n *Notifier) Run(ctx context.Context) {
	if !n.ran.CompareAndSwap(false, true) {
		panic("webhook: Run called twice")
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-n.queue:
					n.deliver(ctx, d)
				}
			}
		})
	}
	wg.Wait()
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	for {
		select {
		case d := <-n.queue:
			n.drop(d, "notifier stopped")
		default:
			return
		}
	}
}

// deliver attempts d until it is delivered, fails permanently, runs out of
// attempts, or ctx ends.
func (n *Notifier) deliver(ctx context.Context, d *delivery) {
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			n.drop(d, "notifier stopped")
			return
		}
		status, retryAfter, err := n.post(ctx, d)
		if err == nil && status >= 200 && status <= 299 {
			return
		}
		if ctx.Err() != nil { // the failure is ours, not the endpoint's
			n.drop(d, "notifier stopped")
			return
		}
		attrs := []any{"approval_id", d.approvalID, "tenant", d.tenantID, "delivery_id", d.id, "attempt", attempt}
		if err != nil {
			attrs = append(attrs, "err", err)
		} else {
			attrs = append(attrs, "status", status)
		}
		n.log.Warn("webhook delivery failed", attrs...)
		switch {
		case err == nil && !retryable(status):
			n.log.Error("webhook delivery gave up: permanent failure", attrs...)
			return
		case attempt >= n.maxAttempts:
			n.log.Error("webhook delivery gave up: out of attempts", attrs...)
			return
		}
		wait := n.backoff(attempt)
		if retryAfter >= 0 {
			wait = min(retryAfter, n.maxDelay)
		}
		if n.sleep(ctx, wait) != nil {
			n.drop(d, "notifier stopped")
			return
		}
	}
}

// post makes one attempt at d. It returns the response status and its
// Retry-After delay (negative when absent), or the error of a request that
// got no response.
func (n *Notifier) post(ctx context.Context, d *delivery) (status int, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(d.body))
	if err != nil {
		return 0, -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "writ-webhook")
	req.Header.Set(DeliveryHeader, d.id)
	req.Header.Set(SignatureHeader, Sign(n.secret, n.now(), d.body))
	resp, err := n.client.Do(req)
	if err != nil {
		// A *url.Error repeats the URL, which may hold a token; the
		// cause alone says what went wrong.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return 0, -1, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	retryAfter = -1
	if retryable(resp.StatusCode) {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), n.now())
	}
	return resp.StatusCode, retryAfter, nil
}

// retryable reports whether a response with status may succeed later.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500 && status <= 599
}

// parseRetryAfter reads a Retry-After value, delta-seconds or an HTTP
// date, as a delay from now; it returns -1 for an absent or malformed one.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if isDigits(v) {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s > uint64(math.MaxInt64/time.Second) {
			return math.MaxInt64 // out of range: longer than any MaxDelay
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// backoff returns the delay after the attempt-th failed attempt: full
// jitter over min(maxDelay, baseDelay·2^(attempt-1)).
func (n *Notifier) backoff(attempt int) time.Duration {
	ceiling := n.maxDelay
	if k := uint(attempt - 1); k < 63 {
		if d := n.baseDelay << k; d>>k == n.baseDelay && d < ceiling {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0
	}
	if ceiling == math.MaxInt64 {
		return rand.N(ceiling)
	}
	return rand.N(ceiling + 1)
}

// sleep is the default Config.Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
