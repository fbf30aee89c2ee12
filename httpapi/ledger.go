package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/writhq/writ"
)

// mediaNote is the media type of a checkpoint served as its signed note.
const mediaNote = "text/plain; charset=utf-8"

// Cache-Control values of ledger answers. What a tree size names never
// changes (the ledger signs one checkpoint per size, and proofs are
// computed from immutable hashes), so answers for an explicit size may be
// kept for good; "the latest" must be revalidated.
const (
	cacheImmutable = "private, max-age=31536000, immutable"
	cacheLatest    = "no-cache"
)

// errNoLedger answers the ledger routes of a server without a ledger.
var errNoLedger = writ.Errorf(writ.ENOTFOUND, "this server has no ledger")

// handleCheckpoint serves GET /v1/ledger/checkpoint: a checkpoint as JSON,
// or as its signed note text for format=note or Accept: text/plain.
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	if s.ledger == nil {
		s.writeError(w, r, errNoLedger)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, size, format, err := parseCheckpointQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cp, err := s.ledger.Checkpoint(r.Context(), tenantID, size)
	if err == nil {
		err = checkCheckpoint(cp, size)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Vary", "Accept")
	if format == formatNote || (format == "" && prefersNote(r.Header.Values("Accept"))) {
		w.Header().Set("Cache-Control", cacheControl(size != 0))
		writeBody(w, http.StatusOK, mediaNote, []byte(cp.Note))
		return
	}
	s.writeLedgerJSON(w, r, cp, size != 0)
}

// handleIssueCheckpoint serves POST /v1/ledger/checkpoint: sign a
// checkpoint of the tenant's tree now.
func (s *Server) handleIssueCheckpoint(w http.ResponseWriter, r *http.Request) {
	if s.ledger == nil {
		s.writeError(w, r, errNoLedger)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, err := parseTenantQuery(values)
	if err == nil {
		err = noBody(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cp, err := s.ledger.IssueCheckpoint(r.Context(), tenantID)
	if err == nil {
		err = checkCheckpoint(cp, 0)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, cp)
}

// handleInclusionProof serves GET /v1/records/{id}/proof.
func (s *Server) handleInclusionProof(w http.ResponseWriter, r *http.Request) {
	if s.ledger == nil {
		s.writeError(w, r, errNoLedger)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, size, err := parseProofQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.ledger.InclusionProof(r.Context(), tenantID, r.PathValue("id"), size)
	switch {
	case err != nil:
	case p == nil:
		err = errors.New("ledger returned neither an inclusion proof nor an error")
	case size != 0 && (p.TreeSize != size || p.Checkpoint.TreeSize != size):
		err = fmt.Errorf("ledger answered the inclusion proof of tree size %d with one of size %d", size, p.TreeSize)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeLedgerJSON(w, r, p, size != 0)
}

// handleConsistencyProof serves GET /v1/ledger/consistency.
func (s *Server) handleConsistencyProof(w http.ResponseWriter, r *http.Request) {
	if s.ledger == nil {
		s.writeError(w, r, errNoLedger)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, from, to, err := parseConsistencyQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.ledger.ConsistencyProof(r.Context(), tenantID, from, to)
	switch {
	case err != nil:
	case p == nil:
		err = errors.New("ledger returned neither a consistency proof nor an error")
	case p.OldSize != from || (to != 0 && p.NewSize != to):
		err = fmt.Errorf("ledger answered the consistency proof of sizes %d to %d with one of %d to %d", from, to, p.OldSize, p.NewSize)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeLedgerJSON(w, r, p, to != 0)
}

// checkCheckpoint checks what the ledger answered for the checkpoint of
// size (0: the latest). An answer of another size would be cached as the
// one asked for, so it is an internal error.
func checkCheckpoint(cp *writ.Checkpoint, size int64) error {
	switch {
	case cp == nil:
		return errors.New("ledger returned neither a checkpoint nor an error")
	case size != 0 && cp.TreeSize != size:
		return fmt.Errorf("ledger answered the checkpoint of tree size %d with one of size %d", size, cp.TreeSize)
	}
	return nil
}

// writeLedgerJSON answers 200 with v as JSON, cacheable for good when it
// is the answer for explicit tree sizes.
func (s *Server) writeLedgerJSON(w http.ResponseWriter, r *http.Request, v any, explicit bool) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	w.Header().Set("Cache-Control", cacheControl(explicit))
	writeBody(w, http.StatusOK, mediaJSON, body)
}

func cacheControl(explicit bool) string {
	if explicit {
		return cacheImmutable
	}
	return cacheLatest
}

// noBody rejects a request body on a route that takes none.
func noBody(r *http.Request) error {
	empty := r.ContentLength == 0
	if r.ContentLength < 0 { // length unknown: look
		var b [1]byte
		n, _ := io.ReadFull(r.Body, b[:])
		empty = n == 0
	}
	if !empty {
		return writ.Errorf(writ.EINVALID, "%s %s takes no request body", r.Method, r.URL.Path)
	}
	return nil
}

// prefersNote reports whether Accept headers rank text/plain above
// application/json: by quality, then by how specifically the range names
// the type. A tie, or no Accept header, is JSON.
func prefersNote(accept []string) bool {
	noteQ, noteSpec := acceptQuality(accept, "text", "plain")
	jsonQ, jsonSpec := acceptQuality(accept, "application", "json")
	if noteQ != jsonQ {
		return noteQ > jsonQ
	}
	return noteQ > 0 && noteSpec > jsonSpec
}

// acceptQuality returns the quality Accept headers give the media type
// typ/sub, and the specificity of the range that gives it (2 for typ/sub,
// 1 for typ/*, 0 for */*). A type no range matches has quality 0;
// malformed ranges are ignored.
func acceptQuality(accept []string, typ, sub string) (q float64, spec int) {
	spec = -1
	for _, header := range accept {
		for _, rng := range strings.Split(header, ",") {
			if strings.TrimSpace(rng) == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(rng)
			if err != nil {
				continue
			}
			rt, rs, ok := strings.Cut(mt, "/")
			if !ok {
				continue
			}
			var s int
			switch {
			case rt == typ && rs == sub:
				s = 2
			case rt == typ && rs == "*":
				s = 1
			case rt == "*" && rs == "*":
				s = 0
			default:
				continue
			}
			rq := 1.0
			if v, ok := params["q"]; ok {
				if rq, err = strconv.ParseFloat(v, 64); err != nil || rq < 0 || rq > 1 {
					continue
				}
			}
			if s > spec {
				q, spec = rq, s
			}
		}
	}
	return q, spec
}
