package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
)

// errNoEnvelopes answers GET /v1/records/{id}/envelope on a server
// without an envelope source.
var errNoEnvelopes = writ.Errorf(writ.ENOTFOUND, "this server serves no request envelopes")

// errNoKeys answers GET /v1/ledger/keys on a server without a key ring.
var errNoKeys = writ.Errorf(writ.ENOTFOUND, "this server publishes no verifier keys")

// handleEnvelope serves GET /v1/records/{id}/envelope: the stored request
// envelope the record pins (its replay.replay_packet_id), exactly as
// stored. It is the redacted request the check decided: the tool, the
// redacted arguments and the evidence an approver reviews. The record is
// looked up within the tenant first, so another tenant's envelope is not
// found, whatever its content address.
func (s *Server) handleEnvelope(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Envelopes == nil {
		s.writeError(w, r, errNoEnvelopes)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := s.envelope(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", cacheImmutable)
	writeBody(w, http.StatusOK, mediaJSON, body)
}

// envelope reads the envelope of the tenant's record, and checks that
// its bytes hash to the address the record names: bytes that do not are
// never served as the record's.
func (s *Server) envelope(ctx context.Context, tenantID, recordID string) ([]byte, error) {
	rec, err := s.svc.Record(ctx, tenantID, recordID)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("service returned neither a record nor an error")
	}
	hash := rec.Record.Replay.ReplayPacketID
	if hash == "" {
		return nil, writ.Errorf(writ.ENOTFOUND, "record %s pins no request envelope", recordID)
	}
	body, err := s.cfg.Envelopes(ctx, tenantID, rec.Record.Audit.Seq, hash)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != hash {
		return nil, &writ.Error{Code: writ.EINTERNAL, Err: writ.ErrIntegrity,
			Message: fmt.Sprintf("the stored request envelope of record %s fails its hash: the record pins %s, the stored bytes hash to %s; it is not served (writ ledger verify names it)", recordID, hash, got)}
	}
	return body, nil
}

// verifierKeysBody is the body of GET /v1/ledger/keys.
type verifierKeysBody struct {
	Keys []keyring.Key `json:"keys"`
}

// handleVerifierKeys serves GET /v1/ledger/keys: the public verifier keys
// that sign the tenant's ledger (every tenant's, with one key ring),
// retired and revoked ones included, with their validity windows. They hold no private material; a verifier
// checks record signatures and checkpoint notes against them.
func (s *Server) handleVerifierKeys(w http.ResponseWriter, r *http.Request) {
	if s.cfg.VerifierKeys == nil {
		s.writeError(w, r, errNoKeys)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, err := s.cfg.VerifierKeys(r.Context(), tenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", cacheLatest)
	s.writeJSON(w, r, http.StatusOK, verifierKeysBody{Keys: nonNil(keys)})
}
