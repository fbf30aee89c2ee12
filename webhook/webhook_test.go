package webhook

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writhq/writ"
)

var (
	secret = []byte("test-secret-0123456789abcdefghij") // 32 bytes
	epoch  = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
)

// bodyMarker appears only in request bodies, never in a log.
const bodyMarker = "refund-9f1c-body-only"

func approval(id string) *writ.ApprovalRequest {
	return &writ.ApprovalRequest{
		ApprovalID:            id,
		TenantID:              "acme",
		GateID:                "refund_over_limit",
		TargetHint:            bodyMarker,
		ApprovalModeEffective: writ.ModeNetwork,
		Binding: writ.ApprovalBinding{
			DecisionKey:     "refunds.issue",
			ArgumentsDigest: "hmac-sha256:00",
			BundleRevisions: []string{"refunds@1"},
		},
		RecordID:    "rec_1",
		DecisionID:  "dec_1",
		SubjectIDs:  []string{"cust_1"},
		RequestedBy: writ.Requester{ActorID: "agent_7"},
		Reasons:     []writ.Reason{{Code: "approval_required", Message: "refunds over 500 need a person"}},
		CreatedAt:   epoch,
		ExpiresAt:   epoch.Add(time.Hour),
		Allowance:   1,
		State:       writ.ApprovalPending,
		Events:      []writ.ApprovalEvent{},
	}
}

// A logEntry is one captured log record, its attributes as strings.
type logEntry struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logSink is a slog.Handler that captures records and lets a test wait
// for one without polling.
type logSink struct {
	ch  chan logEntry
	mu  sync.Mutex
	all []logEntry
}

func newLogSink() *logSink { return &logSink{ch: make(chan logEntry, 1000)} }

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { panic("notifier loggers take no attributes") }
func (s *logSink) WithGroup(string) slog.Handler            { panic("notifier loggers take no groups") }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	e := logEntry{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		e.attrs[a.Key] = a.Value.String()
		return true
	})
	s.mu.Lock()
	s.all = append(s.all, e)
	s.mu.Unlock()
	s.ch <- e
	return nil
}

// wait returns the next record with message prefix msg, failing the test
// after a generous timeout.
func (s *logSink) wait(t *testing.T, msg string) logEntry {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-s.ch:
			if strings.HasPrefix(e.msg, msg) {
				return e
			}
		case <-timeout:
			t.Fatalf("no log %q within 10s; got %v", msg, s.entries())
		}
	}
}

func (s *logSink) entries() []logEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logEntry(nil), s.all...)
}

// count counts the records at level whose message starts with msg.
func (s *logSink) count(level slog.Level, msg string) int {
	c := 0
	for _, e := range s.entries() {
		if e.level == level && strings.HasPrefix(e.msg, msg) {
			c++
		}
	}
	return c
}

// assertClean fails if a log holds the secret, a body, or a URL token.
func (s *logSink) assertClean(t *testing.T, forbidden ...string) {
	t.Helper()
	forbidden = append(forbidden, string(secret), bodyMarker)
	for _, e := range s.entries() {
		line := e.msg + " " + fmtAttrs(e.attrs)
		for _, f := range forbidden {
			if strings.Contains(line, f) {
				t.Errorf("log %q leaks %q", line, f)
			}
		}
	}
}

func fmtAttrs(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v + " ")
	}
	return b.String()
}

// hit is one request the test endpoint received.
type hit struct {
	method, contentType, delivery, signature string
	body                                     []byte
}

// endpoint is a webhook receiver on loopback whose nth response (from 0)
// respond chooses.
type endpoint struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newEndpoint(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *endpoint {
	e := &endpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		n := len(e.hits)
		e.hits = append(e.hits, hit{r.Method, r.Header.Get("Content-Type"), r.Header.Get(DeliveryHeader), r.Header.Get(SignatureHeader), body})
		e.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) received() []hit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hit(nil), e.hits...)
}

func status(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes)-1)])
	}
}

// fixture is a notifier with a clock that ticks a second per reading and
// a Sleep that records its delays and returns at once.
type fixture struct {
	n    *Notifier
	logs *logSink
	mu   sync.Mutex
	naps []time.Duration
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{logs: newLogSink()}
	var ticks atomic.Int64
	cfg.Secret = secret
	cfg.Logger = slog.New(f.logs)
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return epoch.Add(time.Duration(ticks.Add(1)) * time.Second) }
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) error {
			f.mu.Lock()
			f.naps = append(f.naps, d)
			f.mu.Unlock()
			return ctx.Err()
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.n = n
	return f
}

func (f *fixture) sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.naps...)
}

// deliver runs one delivery to its end on the test goroutine.
func (f *fixture) deliver(t *testing.T, a *writ.ApprovalRequest) {
	t.Helper()
	d, err := newDelivery(EventApprovalRequested, a)
	if err != nil {
		t.Fatalf("newDelivery: %v", err)
	}
	f.n.deliver(t.Context(), d)
}

// run starts Run and returns a function that stops it and waits for it.
func (f *fixture) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		f.n.Run(ctx)
		close(done)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10s of its context ending")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestSignVerify(t *testing.T) {
	body := []byte(`{"type":"approval.requested"}`)
	sig := Sign(secret, epoch, body)
	other := []byte("another-secret-0123456789abcdefg")
	good := sig[strings.Index(sig, "v1="):]
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		want   error // nil, a sentinel, or errAny for an argument error
	}{
		{"valid", secret, sig, body, epoch, nil},
		{"valid at the edge of tolerance", secret, sig, body, epoch.Add(5 * time.Minute), nil},
		{"valid from slightly ahead", secret, sig, body, epoch.Add(-5 * time.Minute), nil},
		{"unknown fields ignored", secret, "v0=zz,t=1772600767," + good + ",v2=whatever", body, epoch, nil},
		{"one of several v1 matches (rotation)", secret, "t=1772600767,v1=" + strings.Repeat("ab", 32) + "," + good, body, epoch, nil},
		{"wrong secret", other, sig, body, epoch, ErrSignatureMismatch},
		{"changed body", secret, sig, []byte(`{"type":"approval.requested" }`), epoch, ErrSignatureMismatch},
		{"empty body", secret, sig, nil, epoch, ErrSignatureMismatch},
		{"changed timestamp", secret, "t=1772600768," + good, body, epoch, ErrSignatureMismatch},
		{"timestamp with a leading zero", secret, "t=01772600767," + good, body, epoch, ErrSignatureMismatch},
		{"old timestamp", secret, sig, body, epoch.Add(5*time.Minute + time.Second), ErrStaleSignature},
		{"future timestamp", secret, sig, body, epoch.Add(-5*time.Minute - time.Second), ErrStaleSignature},
		{"empty header", secret, "", body, epoch, ErrMalformedSignature},
		{"no t", secret, good, body, epoch, ErrMalformedSignature},
		{"no v1", secret, "t=1772600767", body, epoch, ErrMalformedSignature},
		{"two t", secret, "t=1772600767,t=1772600767," + good, body, epoch, ErrMalformedSignature},
		{"signed t", secret, "t=+1772600767," + good, body, epoch, ErrMalformedSignature},
		{"negative t", secret, "t=-1," + good, body, epoch, ErrMalformedSignature},
		{"huge t", secret, "t=99999999999999999999," + good, body, epoch, ErrMalformedSignature},
		{"spaces", secret, "t=1772600767, " + good, body, epoch, ErrMalformedSignature},
		{"short v1", secret, "t=1772600767,v1=abcd", body, epoch, ErrMalformedSignature},
		{"v1 not hex", secret, "t=1772600767,v1=" + strings.Repeat("zz", 32), body, epoch, ErrMalformedSignature},
		{"field without =", secret, sig + ",v1", body, epoch, ErrMalformedSignature},
		{"short secret", secret[:31], sig, body, epoch, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.header, tt.body, tt.now, 5*time.Minute)
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("Verify(%q) = %v, want nil", tt.header, err)
			case tt.want == errAny && err == nil:
				t.Errorf("Verify(%q) = nil, want an error", tt.header)
			case tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Errorf("Verify(%q) = %v, want %v", tt.header, err, tt.want)
			}
		})
	}
	if err := Verify(secret, sig, body, epoch, 0); err == nil {
		t.Error("Verify with tolerance 0 = nil, want an error")
	}
}

var errAny = errors.New("any error")

// TestSignWireFormat pins the signature to a value computed by hand, so
// that a receiver in another language can check its implementation.
func TestSignWireFormat(t *testing.T) {
	// printf '%s' '1772600767.{"a":1}' | openssl dgst -sha256 -hmac 'test-secret-0123456789abcdefghij'
	const want = "t=1772600767,v1=69332128945278e4886adcf23c73b0ac4ed5d90063fc07908c75dae5478516bb"
	got := Sign(secret, epoch, []byte(`{"a":1}`))
	if !strings.HasPrefix(got, "t=1772600767,v1=") || len(got) != len(want) {
		t.Fatalf("Sign = %q, want the form %q", got, want)
	}
	if got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func TestDeliveryFormat(t *testing.T) {
	ep := newEndpoint(t, status(http.StatusNoContent))
	f := newFixture(t, Config{URL: ep.URL})
	a := approval("apr_1")
	f.deliver(t, a)

	hits := ep.received()
	if len(hits) != 1 {
		t.Fatalf("endpoint got %d requests, want 1", len(hits))
	}
	h := hits[0]
	if h.method != http.MethodPost || h.contentType != "application/json" {
		t.Errorf("request is %s with Content-Type %q, want POST with application/json", h.method, h.contentType)
	}
	if err := Verify(secret, h.signature, h.body, epoch, time.Minute); err != nil {
		t.Errorf("Verify(%q) = %v, want nil", h.signature, err)
	}
	var got struct {
		Type       string                `json:"type"`
		DeliveryID string                `json:"delivery_id"`
		Approval   *writ.ApprovalRequest `json:"approval"`
	}
	dec := json.NewDecoder(strings.NewReader(string(h.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("body %s does not decode: %v", h.body, err)
	}
	if got.Type != EventApprovalRequested {
		t.Errorf("type = %q, want %q", got.Type, EventApprovalRequested)
	}
	if got.DeliveryID == "" || got.DeliveryID != h.delivery || len(got.DeliveryID) > 64 {
		t.Errorf("delivery_id = %q, Writ-Delivery = %q, want the same non-empty id of at most 64 bytes", got.DeliveryID, h.delivery)
	}
	if !reflect.DeepEqual(got.Approval, a) {
		t.Errorf("approval = %+v, want %+v", got.Approval, a)
	}
	if !strings.HasPrefix(string(h.body), `{"type":"approval.requested","delivery_id":"`+h.delivery+`","approval":{"approval_id":"apr_1",`) {
		t.Errorf("body = %s, want the members in the documented order", h.body)
	}
	if n := len(f.logs.entries()); n != 0 {
		t.Errorf("a delivered announcement logged %v, want nothing", f.logs.entries())
	}
}

func TestDeliveryHasNoNullLists(t *testing.T) {
	d, err := newDelivery(EventApprovalRequested, &writ.ApprovalRequest{ApprovalID: "apr_1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{`"bundle_revisions":[]`, `"subject_ids":[]`, `"reasons":[]`, `"events":[]`} {
		if !strings.Contains(string(d.body), member) {
			t.Errorf("body %s lacks %s", d.body, member)
		}
	}
	if strings.Contains(string(d.body), "null") {
		t.Errorf("body %s holds a null", d.body)
	}
}

func TestRetriesUntilDelivered(t *testing.T) {
	ep := newEndpoint(t, status(500, 502, 200))
	f := newFixture(t, Config{URL: ep.URL, BaseDelay: time.Second, MaxDelay: time.Minute})
	f.deliver(t, approval("apr_1"))

	hits := ep.received()
	if len(hits) != 3 {
		t.Fatalf("endpoint got %d requests, want 3 (500, 502, then 200)", len(hits))
	}
	for i, h := range hits {
		if h.delivery != hits[0].delivery || string(h.body) != string(hits[0].body) {
			t.Errorf("attempt %d: Writ-Delivery %q with body %s, want %q with the first body", i+1, h.delivery, h.body, hits[0].delivery)
		}
		if err := Verify(secret, h.signature, h.body, epoch, time.Minute); err != nil {
			t.Errorf("attempt %d: Verify(%q) = %v, want nil", i+1, h.signature, err)
		}
		if i > 0 && h.signature == hits[i-1].signature {
			t.Errorf("attempt %d reuses the signature %q of the one before; want it signed anew", i+1, h.signature)
		}
	}
	naps := f.sleeps()
	if len(naps) != 2 {
		t.Fatalf("slept %v, want 2 backoffs", naps)
	}
	for i, d := range naps {
		if ceiling := time.Second << i; d < 0 || d > ceiling {
			t.Errorf("backoff after attempt %d = %v, want within [0, %v]", i+1, d, ceiling)
		}
	}
	if warns, errs := f.logs.count(slog.LevelWarn, "webhook delivery failed"), f.logs.count(slog.LevelError, ""); warns != 2 || errs != 0 {
		t.Errorf("logged %d failures and %d errors, want 2 and 0: %v", warns, errs, f.logs.entries())
	}
	f.logs.assertClean(t)
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	ep := newEndpoint(t, status(http.StatusServiceUnavailable))
	f := newFixture(t, Config{URL: ep.URL, MaxAttempts: 4})
	f.deliver(t, approval("apr_1"))

	if n := len(ep.received()); n != 4 {
		t.Errorf("endpoint got %d requests, want MaxAttempts = 4", n)
	}
	if n := len(f.sleeps()); n != 3 {
		t.Errorf("slept %d times, want 3 (none after the last attempt)", n)
	}
	warn := f.logs.wait(t, "webhook delivery failed")
	if warn.level != slog.LevelWarn || warn.attrs["approval_id"] != "apr_1" || warn.attrs["attempt"] != "1" || warn.attrs["status"] != "503" {
		t.Errorf("first failure logged %v %+v, want a warning with approval_id apr_1, attempt 1, status 503", warn.level, warn.attrs)
	}
	e := f.logs.wait(t, "webhook delivery gave up")
	if e.level != slog.LevelError || e.attrs["approval_id"] != "apr_1" || e.attrs["attempt"] != "4" {
		t.Errorf("giving up logged %v %+v, want an error with approval_id apr_1 and attempt 4", e.level, e.attrs)
	}
	f.logs.assertClean(t)
}

func TestWhichStatusesAreRetried(t *testing.T) {
	tests := []struct {
		status int
		retry  bool
	}{
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusNotFound, false},
		{http.StatusGone, false},
		{http.StatusUnprocessableEntity, false},
		{http.StatusFound, false}, // redirects are not followed
		{http.StatusRequestTimeout, true},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
		{http.StatusServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			ep := newEndpoint(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/moved" {
					t.Errorf("the notifier followed a redirect")
				}
				w.Header().Set("Location", "/moved")
				w.WriteHeader(tt.status)
			})
			f := newFixture(t, Config{URL: ep.URL + "/hook", MaxAttempts: 3})
			f.deliver(t, approval("apr_1"))

			want := 1
			if tt.retry {
				want = 3
			}
			if got := len(ep.received()); got != want {
				t.Errorf("status %d: endpoint got %d requests, want %d", tt.status, got, want)
			}
			if !tt.retry {
				e := f.logs.wait(t, "webhook delivery gave up: permanent failure")
				if e.level != slog.LevelError || e.attrs["approval_id"] != "apr_1" || e.attrs["status"] != strconv.Itoa(tt.status) {
					t.Errorf("status %d: logged %v %+v, want an error naming apr_1 and the status", tt.status, e.level, e.attrs)
				}
				if naps := f.sleeps(); len(naps) != 0 {
					t.Errorf("status %d: slept %v before giving up, want no sleep", tt.status, naps)
				}
			}
		})
	}
}

func TestNetworkErrorsAreRetriedAndLoggedWithoutTheURL(t *testing.T) {
	ep := newEndpoint(t, status(200))
	url := ep.URL + "/hooks/tok-5ecret-path"
	ep.Close() // nothing listens there any more
	f := newFixture(t, Config{URL: url, MaxAttempts: 2})
	f.deliver(t, approval("apr_1"))

	e := f.logs.wait(t, "webhook delivery failed")
	if e.attrs["err"] == "" || e.attrs["approval_id"] != "apr_1" {
		t.Errorf("failure logged %+v, want approval_id apr_1 and the error", e.attrs)
	}
	f.logs.wait(t, "webhook delivery gave up: out of attempts")
	if n := len(f.sleeps()); n != 1 {
		t.Errorf("slept %d times, want 1", n)
	}
	f.logs.assertClean(t, "tok-5ecret-path")
}

func TestRetryAfterIsHonoured(t *testing.T) {
	now := epoch
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration // -1: the jittered backoff, within [0, BaseDelay]
	}{
		{"seconds", "7", 7 * time.Second},
		{"zero", "0", 0},
		{"capped at MaxDelay", "100000", time.Minute},
		{"beyond any duration", "99999999999999999999", time.Minute},
		{"HTTP date", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{"HTTP date in the past", now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"malformed", "soon", -1},
		{"negative", "-5", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 0 {
					w.Header().Set("Retry-After", tt.retryAfter)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			f := newFixture(t, Config{URL: ep.URL, BaseDelay: 2 * time.Second, MaxDelay: time.Minute, Now: func() time.Time { return now }})
			f.deliver(t, approval("apr_1"))

			naps := f.sleeps()
			if len(naps) != 1 || len(ep.received()) != 2 {
				t.Fatalf("slept %v over %d requests, want one sleep between two requests", naps, len(ep.received()))
			}
			if tt.want >= 0 && naps[0] != tt.want {
				t.Errorf("Retry-After %q: slept %v, want %v", tt.retryAfter, naps[0], tt.want)
			}
			if tt.want < 0 && (naps[0] < 0 || naps[0] > 2*time.Second) {
				t.Errorf("Retry-After %q: slept %v, want a backoff within [0, 2s]", tt.retryAfter, naps[0])
			}
		})
	}
}

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	n, err := New(Config{URL: "https://approvals.example/hook", Secret: secret, BaseDelay: time.Second, MaxDelay: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 200; attempt++ {
		ceiling := 5 * time.Minute
		if attempt <= 9 {
			ceiling = time.Second << (attempt - 1)
		}
		low := false
		for range 100 {
			d := n.backoff(attempt)
			if d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", attempt, d, ceiling)
			}
			low = low || d < ceiling/2
		}
		if !low {
			t.Errorf("backoff(%d) never fell below %v in 100 draws; want full jitter", attempt, ceiling/2)
		}
	}
}

func TestAnnounceDropsWhenTheQueueIsFull(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	ep := newEndpoint(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	defer close(release)
	f := newFixture(t, Config{URL: ep.URL, QueueSize: 1})
	stop := f.run(t)

	// Four slow deliveries hold every worker...
	for i := range workers {
		f.n.Announce(approval("apr_busy" + strconv.Itoa(i)))
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d never arrived", i)
		}
	}
	// ...one more fills the queue, and the next is dropped, at once.
	returned := make(chan struct{})
	go func() {
		f.n.Announce(approval("apr_queued"))
		f.n.Announce(approval("apr_dropped"))
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Announce blocked on a full queue")
	}
	e := f.logs.wait(t, "webhook announcement dropped")
	if e.level != slog.LevelError || e.attrs["approval_id"] != "apr_dropped" || e.attrs["reason"] != "queue full" {
		t.Errorf("logged %v %+v, want an error naming apr_dropped with reason queue full", e.level, e.attrs)
	}
	stop()
	// Stopping drops the busy and queued ones, each named in an error.
	dropped := map[string]bool{}
	for _, e := range f.logs.entries() {
		if e.msg == "webhook announcement dropped" {
			dropped[e.attrs["approval_id"]] = true
		}
	}
	for _, id := range []string{"apr_busy0", "apr_busy3", "apr_queued", "apr_dropped"} {
		if !dropped[id] {
			t.Errorf("no drop logged for %s; logs %v", id, f.logs.entries())
		}
	}
	f.logs.assertClean(t)
}

func TestRunDelivers(t *testing.T) {
	got := make(chan hit, 10)
	var ep *endpoint
	ep = newEndpoint(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		got <- ep.received()[n]
	})
	f := newFixture(t, Config{URL: ep.URL})
	f.n.Announce(approval("apr_early")) // queued before Run starts
	f.run(t)
	f.n.Announce(approval("apr_late"))

	ids := map[string]bool{}
	for range 2 {
		select {
		case h := <-got:
			var body struct{ Approval writ.ApprovalRequest }
			if err := json.Unmarshal(h.body, &body); err != nil {
				t.Fatal(err)
			}
			if err := Verify(secret, h.signature, h.body, epoch, time.Minute); err != nil {
				t.Errorf("Verify(%q) = %v, want nil", h.signature, err)
			}
			ids[body.Approval.ApprovalID] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("delivered only %v", ids)
		}
	}
	if !ids["apr_early"] || !ids["apr_late"] {
		t.Errorf("delivered %v, want apr_early and apr_late", ids)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	arrived := make(chan struct{}, 10)
	ep := newEndpoint(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // hang until the client gives up
	})
	f := newFixture(t, Config{URL: ep.URL})
	stop := f.run(t)
	f.n.Announce(approval("apr_inflight"))
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery never arrived")
	}
	stop() // fails the test unless Run returns promptly

	e := f.logs.wait(t, "webhook announcement dropped")
	if e.attrs["approval_id"] != "apr_inflight" || e.attrs["reason"] != "notifier stopped" {
		t.Errorf("logged %+v, want apr_inflight dropped because the notifier stopped", e.attrs)
	}
	f.n.Announce(approval("apr_after"))
	e = f.logs.wait(t, "webhook announcement dropped")
	if e.level != slog.LevelError || e.attrs["approval_id"] != "apr_after" || e.attrs["reason"] != "notifier stopped" {
		t.Errorf("Announce after Run logged %v %+v, want an error naming apr_after", e.level, e.attrs)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Run did not panic")
		}
	}()
	f.n.Run(t.Context())
}

// TestRunStopsWhileWaitingToRetry uses the real Sleep: cancelling must cut
// a long wait short.
func TestRunStopsWhileWaitingToRetry(t *testing.T) {
	arrived := make(chan struct{}, 10)
	ep := newEndpoint(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
		arrived <- struct{}{}
	})
	f := newFixture(t, Config{URL: ep.URL, Sleep: sleep, MaxDelay: time.Hour})
	stop := f.run(t)
	f.n.Announce(approval("apr_1"))
	<-arrived
	f.logs.wait(t, "webhook delivery failed") // now waiting an hour
	stop()
	e := f.logs.wait(t, "webhook announcement dropped")
	if e.attrs["approval_id"] != "apr_1" {
		t.Errorf("logged %+v, want apr_1 dropped", e.attrs)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no URL", Config{Secret: secret}},
		{"relative URL", Config{URL: "/hook", Secret: secret}},
		{"plain http off loopback", Config{URL: "http://approvals.example/hook", Secret: secret}},
		{"other scheme", Config{URL: "ftp://approvals.example/hook", Secret: secret}},
		{"no secret", Config{URL: "https://approvals.example/hook"}},
		{"short secret", Config{URL: "https://approvals.example/hook", Secret: secret[:31]}},
		{"negative attempts", Config{URL: "https://approvals.example/hook", Secret: secret, MaxAttempts: -1}},
		{"negative queue", Config{URL: "https://approvals.example/hook", Secret: secret, QueueSize: -1}},
		{"base above max", Config{URL: "https://approvals.example/hook", Secret: secret, BaseDelay: time.Hour, MaxDelay: time.Minute}},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil {
			t.Errorf("New(%s) = nil error, want one", tt.name)
		}
	}
	for _, u := range []string{"https://approvals.example/hook", "http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]:9/hook"} {
		if _, err := New(Config{URL: u, Secret: secret}); err != nil {
			t.Errorf("New(URL %s) = %v, want nil", u, err)
		}
	}
}

func TestNewCopiesTheSecret(t *testing.T) {
	s := append([]byte(nil), secret...)
	n, err := New(Config{URL: "https://approvals.example/hook", Secret: s})
	if err != nil {
		t.Fatal(err)
	}
	s[0] ^= 0xff
	if string(n.secret) != string(secret) {
		t.Error("changing the caller's secret after New changed the notifier's")
	}
}

// FuzzVerify feeds Verify untrusted headers: it must not panic, must
// return one of its documented errors, and may accept only a header that
// carries the true signature.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"type":"approval.requested","delivery_id":"X","approval":{}}`)
	f.Add(Sign(secret, epoch, body), body, epoch.Unix())
	f.Add("t=1772600767,v1="+strings.Repeat("0", 64), body, epoch.Unix())
	f.Add("t=1772600767,v1=,v1=,t=", []byte{}, int64(0))
	f.Add(",,,==,t==1,v1==", body, int64(-1))
	f.Add("t=9223372036854775807,v1=00", body, int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, header string, body []byte, now int64) {
		err := Verify(secret, header, body, time.Unix(now, 0), 5*time.Minute)
		if err != nil {
			if !errors.Is(err, ErrMalformedSignature) && !errors.Is(err, ErrStaleSignature) && !errors.Is(err, ErrSignatureMismatch) {
				t.Fatalf("Verify(%q) = %v, not one of the documented errors", header, err)
			}
			return
		}
		ts, _, perr := parseSignature(header)
		if perr != nil {
			t.Fatalf("Verify(%q) accepted a header that does not parse: %v", header, perr)
		}
		if want := "v1=" + hex.EncodeToString(mac(secret, ts, body)); !strings.Contains(strings.ToLower(header), want) {
			t.Fatalf("Verify(%q) accepted a header without the true signature %s", header, want)
		}
	})
}
