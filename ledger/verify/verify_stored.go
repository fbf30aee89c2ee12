package verify

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/writhq/writ"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/record"
)

// StoredSource is what VerifyStored reads: a store's records with their
// receipts, its run events, its approval requests and events, and its
// blobs. Both stores implement it.
type StoredSource interface {
	ApprovalSource
	ledger.ShadowStore
	// ScanReceipts returns up to limit of the tenant's records with seq >
	// after, each with its receipt and envelope, in seq order.
	ScanReceipts(ctx context.Context, tenantID string, after int64, limit int) ([]ledger.StoredReceipt, error)
	// ScanRunEvents returns up to limit of the tenant's run events after
	// the event (afterRun, afterSeq), in (run_id, seq) order.
	ScanRunEvents(ctx context.Context, tenantID, afterRun string, afterSeq int64, limit int) ([]ledger.RunEvent, error)
	// ScanBlobs returns up to limit blobs whose hash sorts after after,
	// in hash order (byte-wise).
	ScanBlobs(ctx context.Context, after string, limit int) ([]ledger.Blob, error)
	// ScanApprovalIndex returns up to limit of the tenant's approval
	// requests' index columns, approval id after after, in approval id
	// order (byte-wise).
	ScanApprovalIndex(ctx context.Context, tenantID, after string, limit int) ([]ledger.ApprovalIndex, error)
	// ScanClaims returns up to limit of the tenant's index rows of one
	// kind (ledger.ClaimIdempotency, ledger.ClaimBlock, ledger.ClaimReport) in the order of
	// their primary key, after the row after (nil to start).
	ScanClaims(ctx context.Context, tenantID, kind string, after *ledger.ClaimRow, limit int) ([]ledger.ClaimRow, error)
}

// Finding kinds of what is stored beside the records.
const (
	FindingReceiptMismatch  = "receipt_mismatch"   // a stored receipt that its record's bound.receipt does not match
	FindingBlobMismatch     = "blob_mismatch"      // a blob whose bytes do not hash to its content address
	FindingRunEventMismatch = "run_event_mismatch" // a run event that its record's bound digests do not bear out
	FindingShadowMismatch   = "shadow_mismatch"    // a shadow decision that its record's bound.shadow does not match, or a bound one missing
	FindingClaimMismatch    = "claim_mismatch"     // an idempotency, block or report row that its record's bound.claims does not match, or a bound one missing
)

// storedScanSize is how many rows VerifyStored asks a store for at once.
const storedScanSize = 1024

// binding is a digest a record binds and whether what it binds was found.
type binding struct {
	seq    int64
	digest string
	start  string // a run event's run start
	seen   bool
}

// VerifyStored checks what the store keeps beside the records against
// the digests the sealed records bind (writ.Record.Bound): each stored
// receipt, each run event (its content, its run's start, its order, no
// event missing or added), each approval request and event, each envelope
// stored with its record against the address the record pins, and each
// blob against its content address. It reports one finding per problem:
// receipt_mismatch, run_event_mismatch, approval_mismatch,
// blob_mismatch. Records sealed before writ bound these carry no
// digests; what is stored beside them is not checked. VerifyStored trusts
// the records' bound digests: Verify checks the records themselves.
func VerifyStored(ctx context.Context, src StoredSource, now time.Time) ([]Finding, error) {
	tenants, err := src.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	out := []Finding{}
	for _, t := range tenants {
		sv := &storedVerifier{src: src, tenant: t, runs: map[string]*binding{}, requests: map[string][]*binding{}, approvalEvents: map[string]*binding{}, shadows: map[string]*binding{},
			claims: map[string]map[string]*binding{ledger.ClaimIdempotency: {}, ledger.ClaimBlock: {}, ledger.ClaimReport: {}}}
		if err := sv.receipts(ctx); err != nil {
			return nil, err
		}
		if err := sv.runEvents(ctx); err != nil {
			return nil, err
		}
		if err := sv.approvals(ctx, now); err != nil {
			return nil, err
		}
		if err := sv.shadowDecisions(ctx); err != nil {
			return nil, err
		}
		if err := sv.claimRows(ctx); err != nil {
			return nil, err
		}
		out = append(out, sv.findings...)
	}
	fs, err := verifyBlobs(ctx, src)
	if err != nil {
		return nil, err
	}
	return append(out, fs...), nil
}

type storedVerifier struct {
	src      StoredSource
	tenant   string
	findings []Finding
	// The digests bound by the tenant's records, by record id.
	runs           map[string]*binding
	requests       map[string][]*binding
	approvalEvents map[string]*binding
	shadows        map[string]*binding
	claims         map[string]map[string]*binding // by claim kind, then record id
}

func (v *storedVerifier) add(seq int64, recordID, kind, format string, args ...any) {
	v.findings = append(v.findings, Finding{TenantID: v.tenant, Seq: seq, RecordID: recordID, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// storedOf is what VerifyStored needs of a record.
type storedOf struct {
	recordID string
	packet   string // replay.replay_packet_id: the envelope's address
	bound    *writ.Bound
}

// readStored reads a record's record_id, replay packet id and bound
// members, skipping the others without decoding them: most of a record
// is members VerifyStored does not need.
func readStored(raw []byte) (storedOf, error) {
	var out storedOf
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return out, fmt.Errorf("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return out, err
		}
		switch name.String() {
		case "record_id":
			v, err := dec.ReadToken()
			if err != nil {
				return out, err
			}
			out.recordID = v.String()
		case "replay":
			var r struct {
				ReplayPacketID string `json:"replay_packet_id"`
			}
			if err := jsonv2.UnmarshalDecode(dec, &r); err != nil {
				return out, err
			}
			out.packet = r.ReplayPacketID
		case "bound":
			out.bound = new(writ.Bound)
			if err := jsonv2.UnmarshalDecode(dec, out.bound); err != nil {
				return out, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// receipts checks every stored receipt and collects the other digests
// the records bind.
func (v *storedVerifier) receipts(ctx context.Context) error {
	var after int64
	for {
		page, err := v.src.ScanReceipts(ctx, v.tenant, after, storedScanSize)
		if err != nil {
			return fmt.Errorf("tenant %s: receipts: %w", v.tenant, err)
		}
		for _, r := range page {
			after = max(after+1, r.Seq)
			so, err := readStored(r.Record)
			if err != nil {
				// Verify reports a record it cannot read.
				continue
			}
			id, bd := so.recordID, so.bound
			if r.Envelope != nil {
				// The envelope's row names its own address: it must be
				// the one the record pins, and the bytes must hash to it.
				if r.EnvelopeHash != so.packet {
					v.add(r.Seq, id, FindingBlobMismatch, "the envelope stored with the record is %s; the record pins %s", r.EnvelopeHash, so.packet)
				} else if got := record.Digest(r.Envelope); got != r.EnvelopeHash {
					v.add(r.Seq, id, FindingBlobMismatch, "the envelope stored with the record hashes to %s, not to its address %s", got, r.EnvelopeHash)
				}
			}
			if bd == nil {
				// A record without bound digests predates them.
				continue
			}
			if bd.Receipt != "" {
				if got := record.Digest(r.Receipt); got != bd.Receipt {
					v.add(r.Seq, id, FindingReceiptMismatch, "the stored receipt hashes to %s; the record binds %s", got, bd.Receipt)
				}
			}
			if bd.RunEvent != "" {
				v.runs[id] = &binding{seq: r.Seq, digest: bd.RunEvent, start: bd.RunStart}
			}
			for _, d := range bd.ApprovalRequests {
				v.requests[id] = append(v.requests[id], &binding{seq: r.Seq, digest: d})
			}
			if bd.ApprovalEvent != "" {
				v.approvalEvents[id] = &binding{seq: r.Seq, digest: bd.ApprovalEvent}
			}
			if bd.Shadow != "" {
				v.shadows[id] = &binding{seq: r.Seq, digest: bd.Shadow}
			}
			if c := bd.Claims; c != nil {
				for _, k := range [...]struct{ kind, digest string }{{ledger.ClaimIdempotency, c.Idempotency}, {ledger.ClaimBlock, c.Block}, {ledger.ClaimReport, c.Report}} {
					if k.digest != "" {
						v.claims[k.kind][id] = &binding{seq: r.Seq, digest: k.digest}
					}
				}
			}
		}
		if len(page) < storedScanSize {
			return nil
		}
	}
}

// unbound reports whether a record that binds nothing of a kind may
// still have it stored beside it: only when it predates bound digests.
// A record that does not exist is a finding (named by the caller).
func (v *storedVerifier) unbound(ctx context.Context, recordID string) (exists, predates bool, err error) {
	sr, err := v.src.Record(ctx, v.tenant, recordID)
	if writ.ErrorCode(err) == writ.ENOTFOUND {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("tenant %s: record %s: %w", v.tenant, recordID, err)
	}
	return true, sr.Record.Bound == nil, nil
}

// runEvents checks every run event of the tenant against the record it
// names, and that no bound event is missing.
func (v *storedVerifier) runEvents(ctx context.Context) error {
	var (
		afterRun string
		afterSeq int64
		run      string // the run being read
		last     int64  // its last event's seq
		start    string // its start event's digest
		lastRec  int64  // the chain seq of its last event's record
	)
	for {
		page, err := v.src.ScanRunEvents(ctx, v.tenant, afterRun, afterSeq, storedScanSize)
		if err != nil {
			return fmt.Errorf("tenant %s: run events: %w", v.tenant, err)
		}
		for i := range page {
			ev := &page[i]
			afterRun, afterSeq = ev.RunID, ev.Seq
			if ev.RunID != run {
				run, last, start, lastRec = ev.RunID, 0, "", 0
			}
			where := fmt.Sprintf("run %s event %d (%s)", ev.RunID, ev.Seq, ev.Kind)
			if ev.Seq != last+1 {
				v.add(0, ev.RecordID, FindingRunEventMismatch, "%s follows event %d: events are missing", where, last)
			}
			last = ev.Seq
			d, err := ledger.RunEventDigest(ev, ev.RecordID)
			if err != nil {
				v.add(0, ev.RecordID, FindingRunEventMismatch, "%s cannot be read: %v", where, err)
				continue
			}
			if ev.Kind == ledger.RunStarted {
				if ev.Seq != 1 || ev.RecordID != "" {
					v.add(0, ev.RecordID, FindingRunEventMismatch, "%s: a run starts with its first event, which names no record", where)
				}
				start = d
				continue
			}
			if ev.RecordID == "" {
				v.add(0, "", FindingRunEventMismatch, "%s names no record", where)
				continue
			}
			b := v.runs[ev.RecordID]
			if b == nil {
				exists, predates, err := v.unbound(ctx, ev.RecordID)
				switch {
				case err != nil:
					return err
				case !exists:
					v.add(0, ev.RecordID, FindingRunEventMismatch, "%s names record %s, which is not in the ledger", where, ev.RecordID)
				case !predates:
					v.add(0, ev.RecordID, FindingRunEventMismatch, "%s names record %s, which binds no run event", where, ev.RecordID)
				}
				continue
			}
			if b.seen {
				v.add(b.seq, ev.RecordID, FindingRunEventMismatch, "%s: record %s binds one run event, and another event names it too", where, ev.RecordID)
				continue
			}
			b.seen = true
			if d != b.digest {
				v.add(b.seq, ev.RecordID, FindingRunEventMismatch, "%s hashes to %s; record %s binds %s", where, d, ev.RecordID, b.digest)
			}
			if b.start != "" && b.start != start {
				v.add(b.seq, ev.RecordID, FindingRunEventMismatch, "the start event of run %s hashes to %s; record %s binds %s", ev.RunID, start, ev.RecordID, b.start)
			}
			if b.seq <= lastRec {
				v.add(b.seq, ev.RecordID, FindingRunEventMismatch, "%s is out of order: its record is seq %d, after seq %d", where, b.seq, lastRec)
			}
			lastRec = max(lastRec, b.seq)
		}
		if len(page) < storedScanSize {
			break
		}
	}
	for _, id := range unseen(v.runs) {
		b := v.runs[id]
		v.add(b.seq, id, FindingRunEventMismatch, "record %s binds a run event (%s) that is not stored", id, b.digest)
	}
	return nil
}

// approvals checks every approval request and event of the tenant against
// the digests of the records written with them.
func (v *storedVerifier) approvals(ctx context.Context, now time.Time) error {
	q := writ.ApprovalQuery{TenantID: v.tenant, Limit: 1000}
	docs := map[string]*writ.ApprovalRequest{}
	for {
		page, err := v.src.Approvals(ctx, q, now)
		if err != nil {
			return fmt.Errorf("tenant %s: approvals: %w", v.tenant, err)
		}
		for i := range page.Approvals {
			a := &page.Approvals[i]
			docs[a.ApprovalID] = a
			if err := v.approval(ctx, a); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	ids := slices.Sorted(maps.Keys(v.requests))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(v.requests[a][0].seq, v.requests[b][0].seq) })
	for _, id := range ids {
		for _, b := range v.requests[id] {
			if !b.seen {
				v.add(b.seq, id, FindingApprovalMismatch, "record %s binds an approval request (%s) that is not stored", id, b.digest)
			}
		}
	}
	for _, id := range unseen(v.approvalEvents) {
		b := v.approvalEvents[id]
		v.add(b.seq, id, FindingApprovalMismatch, "record %s binds an approval event (%s) that is not stored", id, b.digest)
	}
	return v.approvalIndex(ctx, docs)
}

// approvalIndex checks each approval request's index columns against its
// document (which the asking record binds): an edited column would steer
// lookups or the redemption guard while the document still verifies.
func (v *storedVerifier) approvalIndex(ctx context.Context, docs map[string]*writ.ApprovalRequest) error {
	for after := ""; ; {
		page, err := v.src.ScanApprovalIndex(ctx, v.tenant, after, storedScanSize)
		if err != nil {
			return fmt.Errorf("tenant %s: approval index: %w", v.tenant, err)
		}
		for _, ix := range page {
			a := docs[ix.ApprovalID]
			if a == nil {
				continue // not listed: the approvals scan did not read it
			}
			digest, err := ledger.BindingDigest(a.Binding)
			if err != nil {
				continue // the document's own finding says why
			}
			for _, c := range []struct {
				column    string
				got, want any
			}{
				{"gate_id", ix.GateID, a.GateID},
				{"decision_key", ix.DecisionKey, a.Binding.DecisionKey},
				{"binding_digest", ix.BindingDigest, digest},
				{"allowance", ix.Allowance, a.Allowance},
				{"record_id", ix.RecordID, a.RecordID},
				{"created_ns", ix.CreatedNS, a.CreatedAt.UnixNano()},
				{"expires_ns", ix.ExpiresNS, a.ExpiresAt.UnixNano()},
			} {
				if c.got != c.want {
					v.add(0, a.RecordID, FindingApprovalMismatch, "approval %s: its %s column is %v, but its request says %v", a.ApprovalID, c.column, c.got, c.want)
				}
			}
		}
		if len(page) < storedScanSize {
			return nil
		}
		after = page[len(page)-1].ApprovalID
	}
}

func (v *storedVerifier) approval(ctx context.Context, a *writ.ApprovalRequest) error {
	d, err := ledger.ApprovalRequestDigest(a)
	if err != nil {
		v.add(0, a.RecordID, FindingApprovalMismatch, "approval %s cannot be read: %v", a.ApprovalID, err)
	} else if bs, ok := v.requests[a.RecordID]; ok {
		i := slices.IndexFunc(bs, func(b *binding) bool { return !b.seen && b.digest == d })
		if i < 0 {
			v.add(bs[0].seq, a.RecordID, FindingApprovalMismatch, "approval %s hashes to %s, which its asking record %s does not bind", a.ApprovalID, d, a.RecordID)
		} else {
			bs[i].seen = true
		}
	} else if err := v.unboundApproval(ctx, a.RecordID, "approval "+a.ApprovalID, "request"); err != nil {
		return err
	}
	if a.Uses > a.Allowance {
		v.add(0, a.RecordID, FindingApprovalMismatch, "approval %s was redeemed %d times; its allowance is %d", a.ApprovalID, a.Uses, a.Allowance)
	}
	for i := range a.Events {
		ev := &a.Events[i]
		where := fmt.Sprintf("approval %s event %d (%s)", a.ApprovalID, ev.Seq, ev.Kind)
		if ev.Seq != int64(i+1) {
			v.add(0, ev.RecordID, FindingApprovalMismatch, "%s is not event %d: events are missing", where, i+1)
		}
		d, err := ledger.ApprovalEventDigest(a.TenantID, a.ApprovalID, ev, ev.RecordID)
		if err != nil {
			v.add(0, ev.RecordID, FindingApprovalMismatch, "%s cannot be read: %v", where, err)
			continue
		}
		b := v.approvalEvents[ev.RecordID]
		if b == nil {
			if err := v.unboundApproval(ctx, ev.RecordID, where, "event"); err != nil {
				return err
			}
			continue
		}
		if b.seen {
			v.add(b.seq, ev.RecordID, FindingApprovalMismatch, "%s: record %s binds one approval event, and another event names it too", where, ev.RecordID)
			continue
		}
		b.seen = true
		if d != b.digest {
			v.add(b.seq, ev.RecordID, FindingApprovalMismatch, "%s hashes to %s; record %s binds %s", where, d, ev.RecordID, b.digest)
		}
	}
	return nil
}

// unboundApproval reports an approval request or event naming a record
// that binds no such thing (unless the record predates bound digests).
// A missing record is VerifyApprovals' finding.
func (v *storedVerifier) unboundApproval(ctx context.Context, recordID, where, what string) error {
	exists, predates, err := v.unbound(ctx, recordID)
	if err != nil {
		return err
	}
	if exists && !predates {
		v.add(0, recordID, FindingApprovalMismatch, "%s names record %s, which binds no approval %s", where, recordID, what)
	}
	return nil
}

// shadowDecisions checks every shadow decision of the tenant against the
// digest its record binds, and that no bound one is missing. A shadow
// decision whose record binds none is not checked: records sealed before
// writ bound shadow decisions bind none.
func (v *storedVerifier) shadowDecisions(ctx context.Context) error {
	q := ledger.ShadowQuery{TenantID: v.tenant, Limit: 1000}
	for {
		page, err := v.src.ShadowDecisions(ctx, q)
		if err != nil {
			return fmt.Errorf("tenant %s: shadow decisions: %w", v.tenant, err)
		}
		for i := range page.Decisions {
			d := &page.Decisions[i]
			b := v.shadows[d.RecordID]
			if b == nil {
				continue
			}
			got, err := ledger.ShadowDecisionDigest(d, d.RecordID)
			switch {
			case err != nil:
				v.add(b.seq, d.RecordID, FindingShadowMismatch, "the shadow decision of record %s cannot be read: %v", d.RecordID, err)
			case got != b.digest:
				v.add(b.seq, d.RecordID, FindingShadowMismatch, "the shadow decision of record %s hashes to %s; the record binds %s", d.RecordID, got, b.digest)
			}
			b.seen = true
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	for _, id := range unseen(v.shadows) {
		b := v.shadows[id]
		v.add(b.seq, id, FindingShadowMismatch, "record %s binds a shadow decision (%s) that is not stored", id, b.digest)
	}
	return nil
}

// unseen returns the record ids of bindings whose companion was not
// found, in chain order.
func unseen(m map[string]*binding) []string {
	var ids []string
	for id, b := range m {
		if !b.seen {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(m[a].seq, m[b].seq) })
	return ids
}

// claimRows checks every index row through which an answer is served
// again (idempotency keys, blocks, execution report claims) against the
// bound.claims of the record it points at, and that no claim a record
// binds is missing. A block row points at the first record that blocked
// the action; a later record that blocked it again binds the same digest
// and has no row of its own.
func (v *storedVerifier) claimRows(ctx context.Context) error {
	blocks := map[string]bool{} // digests of the block rows
	for _, kind := range []string{ledger.ClaimIdempotency, ledger.ClaimBlock, ledger.ClaimReport} {
		bound := v.claims[kind]
		var after *ledger.ClaimRow
		for {
			page, err := v.src.ScanClaims(ctx, v.tenant, kind, after, storedScanSize)
			if err != nil {
				return fmt.Errorf("tenant %s: %s claims: %w", v.tenant, kind, err)
			}
			for i := range page {
				row := &page[i]
				after = row
				where := claimWhere(row)
				d, err := row.Digest(v.tenant)
				if err != nil {
					v.add(0, row.RecordID, FindingClaimMismatch, "%s cannot be read: %v", where, err)
					continue
				}
				if kind == ledger.ClaimBlock {
					blocks[d] = true
				}
				b := bound[row.RecordID]
				if b == nil {
					sr, err := v.src.Record(ctx, v.tenant, row.RecordID)
					switch {
					case writ.ErrorCode(err) == writ.ENOTFOUND:
						v.add(0, row.RecordID, FindingClaimMismatch, "%s points at record %s, which is not in the ledger", where, row.RecordID)
					case err != nil:
						return fmt.Errorf("tenant %s: record %s: %w", v.tenant, row.RecordID, err)
					case sr.Record.Bound != nil && sr.Record.Bound.Claims != nil:
						v.add(sr.Record.Audit.Seq, row.RecordID, FindingClaimMismatch, "%s points at record %s, which claims no %s", where, row.RecordID, kind)
					}
					// Otherwise the record predates bound claims.
					continue
				}
				b.seen = true
				if d != b.digest {
					v.add(b.seq, row.RecordID, FindingClaimMismatch, "%s hashes to %s; record %s binds %s", where, d, row.RecordID, b.digest)
				}
			}
			if len(page) < storedScanSize {
				break
			}
		}
	}
	for _, kind := range []string{ledger.ClaimIdempotency, ledger.ClaimBlock, ledger.ClaimReport} {
		for _, id := range unseen(v.claims[kind]) {
			b := v.claims[kind][id]
			if kind == ledger.ClaimBlock && blocks[b.digest] {
				continue // an earlier record holds the action's block row
			}
			v.add(b.seq, id, FindingClaimMismatch, "record %s binds its %s claim (%s), which is not stored", id, kind, b.digest)
		}
	}
	return nil
}

// claimWhere names an index row for a finding.
func claimWhere(row *ledger.ClaimRow) string {
	switch {
	case row.Idempotency != nil:
		return fmt.Sprintf("the idempotency key %q", row.Idempotency.Key)
	case row.Block != nil:
		return fmt.Sprintf("the block of %s (arguments %s)", row.Block.DecisionKey, row.Block.ArgsDigest)
	case row.Report != nil:
		return fmt.Sprintf("the execution report claim of decision %s", row.Report.DecisionID)
	}
	return "a " + row.Kind + " row"
}

// verifyBlobs checks every blob against its content address.
func verifyBlobs(ctx context.Context, src StoredSource) ([]Finding, error) {
	var out []Finding
	after := ""
	for {
		page, err := src.ScanBlobs(ctx, after, storedScanSize)
		if err != nil {
			return nil, fmt.Errorf("blobs: %w", err)
		}
		for _, b := range page {
			after = b.Hash
			if got := record.Digest(b.Data); got != b.Hash {
				out = append(out, Finding{Kind: FindingBlobMismatch, Detail: fmt.Sprintf("blob %s (%s) hashes to %s", b.Hash, b.Kind, got)})
			}
		}
		if len(page) < storedScanSize {
			return out, nil
		}
	}
}
