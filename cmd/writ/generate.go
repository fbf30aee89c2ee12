package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
)

// generate builds a large, valid ledger quickly, for benchmarks: it
// decides one request under its pack once, then appends copies of that
// record with fresh ids, trace ids and timestamps, sealed and signed like
// any other. The copies are made by replacing fixed-width values inside
// the record's canonical bytes, so no record is canonicalized again; every
// copy still verifies, hash, signature, chain, tree and rules.
func (m *Main) generate(ctx context.Context, args []string) error {
	fs := m.flags("ledger generate", "--data DIR --request FILE [--records N] [--tenants K]")
	var lf ledgerFlags
	lf.register(fs)
	reqFile := fs.String("request", "", "the check request every record is decided from (required)")
	n := fs.Int("records", 100000, "records to append per tenant")
	tenants := fs.Int("tenants", 1, "tenants (tenant-1, tenant-2, ...)")
	batch := fs.Int("batch", 2000, "records per transaction")
	histGroups := fs.Int("history-groups", 0, "spread the records' contributions to the pack's history aggregates over this many groups (0: none)")
	replayable := fs.Bool("replayable", false, "decide every record afresh and store its request envelope, so that every record replays replay_equal (slower)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *reqFile == "" || *n < 1 || *tenants < 1 || *batch < 1 {
		return usagef("usage: writ ledger generate --data DIR --request FILE [--records N] [--tenants K]")
	}
	packDir, err := findPack(*reqFile)
	if err != nil {
		return err
	}
	pol, err := loadPolicy(packDir)
	if err != nil {
		return err
	}
	req, err := m.readRequest(*reqFile)
	if err != nil {
		return err
	}
	st, err := openStore(lf.data, lf.store)
	if err != nil {
		return err
	}
	defer st.Close()
	// The binding key is made (or read) before any record, as writ serve
	// would: writ refuses to make one later for a ledger that holds
	// records, so a generated ledger is served like any other.
	if _, err := loadBindingKey(ctx, st, lf.data, ""); err != nil {
		return err
	}
	log, _ := m.logger("warn")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys, _, err := m.openSigningKeys(lf.keysDir(), start, log)
	if err != nil {
		return err
	}
	// Store the pinned pack, as an engine would.
	p := pol.Pack
	blobs := []ledger.Blob{{Hash: p.Hash, Kind: "pack_manifest", Data: p.Manifest}}
	for _, f := range p.Files {
		blobs = append(blobs, ledger.Blob{Hash: f.Hash, Kind: "pack_file", Data: f.Data})
	}
	if err := st.PutBlobs(ctx, blobs); err != nil {
		return err
	}
	seal := ledger.NewSeal(keys)
	rng := rand.New(rand.NewPCG(1, 2))
	began := time.Now()
	var total int64
	for ti := 1; ti <= *tenants; ti++ {
		tenant := fmt.Sprintf("tenant-%d", ti)
		tmpl, err := templateRecord(pol, req, tenant, start)
		if err != nil {
			return err
		}
		for done := 0; done < *n; {
			size := min(*batch, *n-done)
			entries := make([]*ledger.Entry, size)
			if *replayable {
				if entries, err = tmpl.decideAll(rng, start.Add(time.Duration(done)*time.Second), size); err != nil {
					return err
				}
			} else {
				for i := range entries {
					entries[i] = tmpl.copy(rng, start.Add(time.Duration(done+i)*time.Second))
				}
			}
			if *histGroups > 0 {
				if err := tmpl.contribute(entries, done, *histGroups); err != nil {
					return err
				}
			}
			if err := st.Append(ctx, entries, seal); err != nil {
				return err
			}
			done += size
			total += int64(size)
		}
		signer, err := keys(start.Add(time.Duration(*n) * time.Second))
		if err != nil {
			return err
		}
		cps, ok := st.(ledger.CheckpointStore)
		if !ok {
			return fmt.Errorf("the store (%T) does not list API keys, so a checkpoint could not state its revocations", st)
		}
		if _, err := ledger.IssueCheckpoint(ctx, cps, signer, lf.name, tenant, time.Now()); err != nil {
			return err
		}
	}
	took := time.Since(began)
	fmt.Fprintf(m.Stdout, "appended %s (%s) in %s: %.0f records/s\n", count(total, "record"), count(*tenants, "tenant"), took.Round(time.Millisecond), float64(total)/took.Seconds())
	return nil
}

// template is one decided record and the fixed-width values in its
// canonical bytes that each copy replaces.
type template struct {
	pol       *policy.Policy
	req       *writ.CheckRequest // as decided, tenant and evidence set
	rec       writ.Record
	presealed []byte
	recordID  string
	decision  string
	traceID   string
	timestamp string
}

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// templateRecord decides req for tenant at the given time and returns
// its record, presealed, with the values copies replace.
func templateRecord(pol *policy.Policy, req *writ.CheckRequest, tenant string, at time.Time) (*template, error) {
	rq := *req
	rq.TenantID = tenant
	rq.IdempotencyKey = ""
	rq.TraceID = "0123456789abcdef0123456789abcdef"
	ev := make([]writ.Evidence, len(rq.Evidence))
	for i, e := range rq.Evidence {
		e.TenantID = tenant
		ev[i] = e
	}
	rq.Evidence = ev
	r, err := pol.Resolve(&rq)
	if err != nil {
		return nil, err
	}
	hist, pinned := zeroHistory(pol, r, &rq, at)
	d := pol.DecideWith(r, &rq, at, hist)
	envelope, err := record.Envelope(&rq, record.NewRedactor(pol.Pack.Controls.Redaction))
	if err != nil {
		return nil, err
	}
	t := &template{recordID: "dr_00000000000000000000000000", decision: "dec_00000000000000000000000000", traceID: rq.TraceID, timestamp: at.UTC().Format(time.RFC3339)}
	rec, err := record.Build(record.Input{RecordID: t.recordID, DecisionID: t.decision, Now: at, Request: &rq, Resolved: r, Decision: d,
		EnvelopeHash: record.Digest(envelope), Redactor: record.NewRedactor(pol.Pack.Controls.Redaction)})
	if err != nil {
		return nil, err
	}
	rec.History = pinned
	// Every copy stores the same receipt ({}), so the template's bound
	// digest is every copy's.
	if err := ledger.Bind(&ledger.Entry{Record: rec, Receipt: generatedReceipt}, nil); err != nil {
		return nil, err
	}
	if t.presealed, err = record.Preseal(rec); err != nil {
		return nil, err
	}
	t.rec = *rec
	t.pol, t.req = pol, &rq
	return t, nil
}

// decideAll decides n copies of the template's request afresh, one
// second apart from at, each with fresh ids and its own trace id, and
// returns their entries with their request envelopes: records a replay
// rebuilds byte for byte. The copies are decided on every CPU.
func (t *template) decideAll(rng *rand.Rand, at time.Time, n int) ([]*ledger.Entry, error) {
	type ids struct{ rec, dec, trace string }
	all := make([]ids, n)
	for i := range all {
		all[i].rec, all[i].dec, all[i].trace = drawIDs(rng)
	}
	red := record.NewRedactor(t.pol.Pack.Controls.Redaction)
	r, err := t.pol.Resolve(t.req)
	if err != nil {
		return nil, err
	}
	out := make([]*ledger.Entry, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				now := at.Add(time.Duration(i) * time.Second)
				rq := *t.req
				rq.TraceID = all[i].trace
				envelope, err := record.Envelope(&rq, red)
				if err != nil {
					errs[i] = err
					continue
				}
				hist, pinned := zeroHistory(t.pol, r, &rq, now)
				rec, err := record.Build(record.Input{RecordID: all[i].rec, DecisionID: all[i].dec, Now: now, Request: &rq, Resolved: r,
					Decision: t.pol.DecideWith(r, &rq, now, hist), EnvelopeHash: record.Digest(envelope), Redactor: red})
				if err != nil {
					errs[i] = err
					continue
				}
				rec.History = pinned
				e := &ledger.Entry{Record: rec, Receipt: generatedReceipt,
					Envelope: envelope}
				if err := ledger.Bind(e, nil); err != nil {
					errs[i] = err
					continue
				}
				if e.Presealed, err = record.Preseal(rec); err != nil {
					errs[i] = err
					continue
				}
				out[i] = e
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// drawIDs draws a record id, a decision id and a trace id.
func drawIDs(rng *rand.Rand) (recordID, decisionID, traceID string) {
	id := func(prefix string) string {
		b := make([]byte, 26)
		for i := range b {
			b[i] = idAlphabet[rng.IntN(len(idAlphabet))]
		}
		return prefix + string(b)
	}
	var tr [16]byte
	for i := range tr {
		tr[i] = byte(rng.Uint32())
	}
	return id("dr_"), id("dec_"), hex.EncodeToString(tr[:])
}

func (t *template) copy(rng *rand.Rand, at time.Time) *ledger.Entry {
	rec := t.rec
	rec.RecordID, rec.DecisionID, rec.TraceID = drawIDs(rng)
	rec.Timestamp = at
	ts := at.Format(time.RFC3339)
	b := bytes.ReplaceAll(t.presealed, []byte(`"`+t.recordID+`"`), []byte(`"`+rec.RecordID+`"`))
	b = bytes.ReplaceAll(b, []byte(`"`+t.decision+`"`), []byte(`"`+rec.DecisionID+`"`))
	b = bytes.ReplaceAll(b, []byte(`"`+t.traceID+`"`), []byte(`"`+rec.TraceID+`"`))
	b = bytes.ReplaceAll(b, []byte(`"timestamp":"`+t.timestamp+`"`), []byte(`"timestamp":"`+ts+`"`))
	return &ledger.Entry{Record: &rec, Presealed: b, Receipt: generatedReceipt}
}

// generatedReceipt is the receipt stored with every generated record:
// generated records answered no check.
var generatedReceipt = []byte(`{}`)
