package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/writhq/writ/ledger"
)

// Store is what the client needs of writ's store: the tenants' newest
// checkpoints, their tree hashes (for consistency proofs), and the
// cosignatures stored so far.
type Store interface {
	Tenants(ctx context.Context) ([]string, error)
	LatestCheckpoint(ctx context.Context, tenantID string) (*ledger.Checkpoint, error)
	ReadHashes(ctx context.Context, tenantID string, indexes []int64) ([]tlog.Hash, error)
	ledger.CosignatureStore
}

// Config configures a Client.
type Config struct {
	Witnesses []Witness
	Store     Store
	// Poll is how often Run looks for checkpoints to submit (default 1s).
	Poll time.Duration
	// Timeout bounds one request to a witness (default 10s).
	Timeout time.Duration
	// HTTP is the client requests go through (default: a client of its
	// own, with keep-alive connections).
	HTTP *http.Client
	Now  func() time.Time
	Log  *slog.Logger
	// OnCosigned, if set, is told of each cosignature stored, with the
	// lag from the checkpoint's signing to the cosignature's receipt.
	OnCosigned func(witness string, lag time.Duration)
	// OnConflict, if set, is told of each conflict (see ErrConflict).
	OnConflict func(witness, tenantID string, err error)
	// OnError, if set, is told of each other failed submission.
	OnError func(witness, tenantID string, err error)
}

// Client submits checkpoints to witnesses and stores their cosignatures.
type Client struct {
	cfg  Config
	wake chan struct{}

	mu    sync.Mutex
	state map[stateKey]*tenantState
}

type stateKey struct {
	witness int
	tenant  string
}

// tenantState is what the client knows of one witness's view of one
// tenant's log.
type tenantState struct {
	seen      int64     // the size the witness last said it cosigned (its 409), -1: unknown
	conflict  error     // set once the witness refused a tree ours extends from
	lastErr   error     // the last submission's error, nil after a success
	behind    int64     // size of the newest checkpoint not yet cosigned, 0 if none
	behindAt  time.Time // when that checkpoint was signed
	cosigned  int64     // size of the newest cosigned checkpoint
	triedSize int64     // the size last submitted in vain (no retry until a newer one)
}

// ErrConflict marks a witness's answer that it cosigned a tree of the
// tenant's log that the ledger's does not extend: a larger tree than the
// ledger's newest checkpoint, or one of a size whose root (or consistency
// with ours) the witness refused. Two histories of the log exist; writ
// cannot resolve that, the operator must (docs/operations.md).
var ErrConflict = errors.New("witness conflict")

// NewClient returns a client. It does nothing until Run or SubmitAll.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, errors.New("witness: no store")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Client{cfg: cfg, wake: make(chan struct{}, 1), state: map[stateKey]*tenantState{}}, nil
}

// Notify asks Run to look for new checkpoints now (for example after the
// checkpointer issued one). It never blocks.
func (c *Client) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run submits new checkpoints until ctx is done.
func (c *Client) Run(ctx context.Context) {
	tick := time.NewTicker(c.cfg.Poll)
	defer tick.Stop()
	for {
		c.SubmitAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.wake:
		}
	}
}

// SubmitAll submits every tenant's newest checkpoint to every witness
// that has not cosigned it yet, the witnesses in parallel. Failures are
// logged and kept for Status; it returns the first error, if any.
func (c *Client) SubmitAll(ctx context.Context) error {
	tenants, err := c.cfg.Store.Tenants(ctx)
	if err != nil {
		c.cfg.Log.Warn("witness: cannot list tenants", "err", err)
		return err
	}
	errs := make([]error, len(c.cfg.Witnesses))
	var wg sync.WaitGroup
	for i := range c.cfg.Witnesses {
		wg.Go(func() {
			for _, t := range tenants {
				if ctx.Err() != nil {
					return
				}
				if err := c.submitTenant(ctx, i, t); err != nil && errs[i] == nil {
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Client) st(i int, tenant string) *tenantState {
	k := stateKey{i, tenant}
	s := c.state[k]
	if s == nil {
		s = &tenantState{seen: -1}
		c.state[k] = s
	}
	return s
}

// submitTenant brings witness i up to the tenant's newest checkpoint.
func (c *Client) submitTenant(ctx context.Context, i int, tenant string) error {
	w := c.cfg.Witnesses[i]
	cp, err := c.cfg.Store.LatestCheckpoint(ctx, tenant)
	if err != nil || cp == nil {
		return err
	}
	last, err := c.cfg.Store.LatestCosignature(ctx, tenant, w.Key.Name(), w.Key.Hash())
	if err != nil {
		return err
	}
	c.mu.Lock()
	s := c.st(i, tenant)
	old := int64(0)
	if last != nil {
		old = last.Size
		s.cosigned = last.Size
	}
	if s.seen > old {
		old = s.seen
	}
	if last != nil && last.Size >= cp.Size {
		s.behind, s.lastErr = 0, nil
		c.mu.Unlock()
		return nil
	}
	s.behind, s.behindAt = cp.Size, cp.IssuedAt
	if s.triedSize == cp.Size && (s.conflict != nil || s.lastErr != nil && !retryable(s.lastErr)) {
		c.mu.Unlock()
		return nil // refused already; a newer checkpoint is tried
	}
	c.mu.Unlock()

	co, err := c.Submit(ctx, i, cp, old)
	c.mu.Lock()
	defer c.mu.Unlock()
	s.triedSize = cp.Size
	if err != nil {
		s.lastErr = err
		if errors.Is(err, ErrConflict) {
			s.conflict = err
			c.cfg.Log.Error("WITNESS CONFLICT: the witness has cosigned a tree of this log that the ledger's newest checkpoint does not extend; two histories of the log exist (see docs/operations.md)",
				"witness", w.Key.Name(), "url", w.URL, "tenant", tenant, "size", cp.Size, "err", err)
			if c.cfg.OnConflict != nil {
				c.cfg.OnConflict(w.Key.Name(), tenant, err)
			}
		} else {
			c.cfg.Log.Warn("witness: checkpoint not cosigned", "witness", w.Key.Name(), "url", w.URL, "tenant", tenant, "size", cp.Size, "err", err)
			if c.cfg.OnError != nil {
				c.cfg.OnError(w.Key.Name(), tenant, err)
			}
		}
		return err
	}
	s.lastErr, s.conflict, s.behind, s.cosigned, s.seen = nil, nil, 0, co.Size, co.Size
	if c.cfg.OnCosigned != nil {
		c.cfg.OnCosigned(w.Key.Name(), co.ReceivedAt.Sub(cp.IssuedAt))
	}
	return nil
}

// retryable reports whether a failed submission is tried again for the
// same checkpoint: a witness that was down, slow or overloaded, yes; one
// that refused the checkpoint (unknown log, untrusted key), only for a
// newer checkpoint.
func retryable(err error) bool {
	var re *refusedError
	return !errors.As(err, &re)
}

// refusedError is a witness's refusal of a checkpoint for a reason a
// retry of the same checkpoint does not change.
type refusedError struct {
	status int
	msg    string
}

func (e *refusedError) Error() string { return e.msg }

// Submit submits the checkpoint cp to witness i, with a consistency proof
// from old, the size the client believes the witness last cosigned (0:
// none). If the witness answers that it cosigned another size (409), it
// submits again from that size, once. It stores and returns the
// witness's cosignature.
func (c *Client) Submit(ctx context.Context, i int, cp *ledger.Checkpoint, old int64) (*ledger.Cosignature, error) {
	w := c.cfg.Witnesses[i]
	for attempt := 0; ; attempt++ {
		if old > cp.Size {
			return nil, fmt.Errorf("%w: witness %s has cosigned tree size %d of %s, larger than the ledger's newest checkpoint (%d)", ErrConflict, w.Key.Name(), old, cp.TenantID, cp.Size)
		}
		body, err := c.requestBody(ctx, cp, old)
		if err != nil {
			return nil, err
		}
		status, answer, ctype, err := c.post(ctx, w, body)
		if err != nil {
			return nil, fmt.Errorf("witness %s: %w", w.Key.Name(), err)
		}
		switch status {
		case http.StatusOK:
			return c.store(ctx, w, cp, answer)
		case http.StatusConflict:
			size, err := parseSize(answer, ctype)
			if err != nil {
				return nil, fmt.Errorf("witness %s answered 409 with %v", w.Key.Name(), err)
			}
			c.mu.Lock()
			c.st(i, cp.TenantID).seen = size
			c.mu.Unlock()
			if attempt > 0 || size == old {
				return nil, fmt.Errorf("witness %s answered 409 (it has cosigned size %d) twice", w.Key.Name(), size)
			}
			old = size
			continue
		case http.StatusUnprocessableEntity:
			if old > 0 {
				return nil, fmt.Errorf("%w: witness %s refused the consistency of %s's tree from size %d to %d (422): its tree of size %d is not the ledger's", ErrConflict, w.Key.Name(), cp.TenantID, old, cp.Size, old)
			}
			return nil, &refusedError{status, fmt.Sprintf("witness %s refused the checkpoint of %s at size %d as unprocessable (422)", w.Key.Name(), cp.TenantID, cp.Size)}
		case http.StatusNotFound:
			return nil, &refusedError{status, fmt.Sprintf("witness %s does not know the log %q (404): its operator must add that origin with the ledger's public key", w.Key.Name(), origin(cp.Note))}
		case http.StatusForbidden:
			return nil, &refusedError{status, fmt.Sprintf("witness %s does not trust the key that signed the checkpoint of %s (403): its operator must configure the ledger's current public key for the log", w.Key.Name(), cp.TenantID)}
		case http.StatusBadRequest:
			return nil, &refusedError{status, fmt.Sprintf("witness %s refused the request for %s at size %d from %d as malformed (400)", w.Key.Name(), cp.TenantID, cp.Size, old)}
		default:
			return nil, fmt.Errorf("witness %s answered %d %s", w.Key.Name(), status, http.StatusText(status))
		}
	}
}

// requestBody is the add-checkpoint body: "old <size>", the consistency
// proof from old to cp.Size one base64 hash a line, an empty line, and
// the signed checkpoint.
func (c *Client) requestBody(ctx context.Context, cp *ledger.Checkpoint, old int64) ([]byte, error) {
	var proof tlog.TreeProof
	if old > 0 && old < cp.Size {
		var err error
		proof, err = tlog.ProveTree(cp.Size, old, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			return c.cfg.Store.ReadHashes(ctx, cp.TenantID, idx)
		}))
		if err != nil {
			return nil, fmt.Errorf("witness: consistency proof of %s from %d to %d: %w", cp.TenantID, old, cp.Size, err)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(cp.Note)
	return b.Bytes(), nil
}

// maxAnswer bounds a witness's answer.
const maxAnswer = 64 << 10

func (c *Client) post(ctx context.Context, w Witness, body []byte) (int, []byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return 0, nil, "", fmt.Errorf("read the answer: %w", err)
	}
	if len(answer) > maxAnswer {
		return 0, nil, "", fmt.Errorf("the answer is longer than %d bytes", maxAnswer)
	}
	return resp.StatusCode, answer, resp.Header.Get("Content-Type"), nil
}

// parseSize reads a 409 answer: a tree size in decimal and a line feed,
// of type text/x.tlog.size.
func parseSize(answer []byte, ctype string) (int64, error) {
	if ct, _, _ := strings.Cut(ctype, ";"); strings.TrimSpace(ct) != "text/x.tlog.size" {
		return 0, fmt.Errorf("Content-Type %q, not text/x.tlog.size", ctype)
	}
	text, ok := strings.CutSuffix(string(answer), "\n")
	n, err := strconv.ParseInt(text, 10, 64)
	if !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != text {
		return 0, fmt.Errorf("body %q, not a tree size and a line feed", truncate(answer))
	}
	return n, nil
}

// store checks a 200 answer and stores the witness's cosignature: the
// answer must be signature lines, and one of them a valid cosignature of
// cp by the configured key (lines of other keys are ignored, as C2SP
// tlog-witness says).
func (c *Client) store(ctx context.Context, w Witness, cp *ledger.Checkpoint, answer []byte) (*ledger.Cosignature, error) {
	lines, err := SplitLines(answer)
	if err != nil {
		return nil, fmt.Errorf("witness %s answered 200 with garbage: %v", w.Key.Name(), err)
	}
	for _, line := range lines {
		at, err := Verify(cp.Note, line, w.Key)
		if errors.Is(err, ErrOtherKey) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("witness %s answered 200 with a cosignature that does not verify: %v", w.Key.Name(), err)
		}
		co := &ledger.Cosignature{TenantID: cp.TenantID, Size: cp.Size, Witness: w.Key.Name(), KeyHash: w.Key.Hash(),
			Line: line, CosignedAt: at, ReceivedAt: c.cfg.Now().UTC()}
		if err := c.cfg.Store.PutCosignature(ctx, co); err != nil {
			return nil, fmt.Errorf("witness: store the cosignature of %s: %w", w.Key.Name(), err)
		}
		return co, nil
	}
	return nil, fmt.Errorf("witness %s answered 200 without a cosignature by its key %s+%08x", w.Key.Name(), w.Key.Name(), w.Key.Hash())
}

// Status is one witness's state, for /readyz and metrics.
type Status struct {
	Witness string
	URL     string
	// Behind counts the tenants whose newest checkpoint it has not
	// cosigned yet; Lag is how long the oldest of those has waited.
	Behind int
	Lag    time.Duration
	// Conflicts are the tenants it reported a conflict for.
	Conflicts []string
	// LastError is the last failed submission's error, if the last
	// submission of some tenant failed.
	LastError string
}

// Status reports each witness's state as of the last submissions.
func (c *Client) Status() []Status {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, len(c.cfg.Witnesses))
	for i, w := range c.cfg.Witnesses {
		out[i] = Status{Witness: w.Key.Name(), URL: w.URL}
	}
	for k, s := range c.state {
		o := &out[k.witness]
		if s.conflict != nil {
			o.Conflicts = append(o.Conflicts, k.tenant)
		}
		if s.lastErr != nil {
			o.LastError = s.lastErr.Error()
		}
		if s.behind > 0 {
			o.Behind++
			if lag := now.Sub(s.behindAt); lag > o.Lag {
				o.Lag = lag
			}
		}
	}
	return out
}

// origin is the first line of a checkpoint note.
func origin(msg []byte) string {
	line, _, _ := bytes.Cut(msg, []byte("\n"))
	return string(line)
}
