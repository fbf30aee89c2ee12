package httpapi

import (
	"errors"
	"net/http"

	"github.com/writhq/writ"
)

// errNoAnnotations answers the routes of records about records on a
// server that seals none.
var errNoAnnotations = writ.Errorf(writ.ENOTFOUND, "this server seals no retractions, feedback or replay results")

// pathRecord checks that a body's record_id, if set, is the path's, and
// returns the path's.
func pathRecord(r *http.Request, inBody string) (string, error) {
	id := r.PathValue("id")
	if inBody != "" && inBody != id {
		return "", &writ.Error{Code: writ.EINVALID, Message: "record_id in the body differs from the path's", Details: []writ.Detail{{Field: "record_id", Message: "leave it out: the path names the record"}}}
	}
	return id, nil
}

// writeAck answers an annotation's acknowledgement: 201, with the
// record's trace in traceparent.
func (s *Server) writeAck(w http.ResponseWriter, r *http.Request, ack *writ.AnnotationAck, err error, tenantID, about string) {
	if err == nil && (ack == nil || ack.TenantID != tenantID || ack.About != about) {
		err = errors.New("the annotation returned no acknowledgement of this record")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.setTraceparent(w, r, ack.TraceID, sampledFlag)
	s.writeJSON(w, r, http.StatusCreated, ack)
}

// handleRetract serves POST /v1/records/{id}/retract: seal a retraction
// of the record (who, why), which supersedes it without replacing it.
func (s *Server) handleRetract(w http.ResponseWriter, r *http.Request) {
	if s.annotations == nil {
		s.writeError(w, r, errNoAnnotations)
		return
	}
	req, err := decodeTenantBody(s, w, r, func(req *writ.RetractRequest) *string { return &req.TenantID })
	if err == nil {
		req.RecordID, err = pathRecord(r, req.RecordID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ack, err := s.annotations.Retract(r.Context(), req)
	s.writeAck(w, r, ack, err, req.TenantID, req.RecordID)
}

// handleFeedback serves POST /v1/records/{id}/feedback: seal a feedback
// entry on the record, linked back to it.
func (s *Server) handleFeedback(w http.ResponseWriter, r *http.Request) {
	if s.annotations == nil {
		s.writeError(w, r, errNoAnnotations)
		return
	}
	req, err := decodeTenantBody(s, w, r, func(req *writ.FeedbackRequest) *string { return &req.TenantID })
	if err == nil {
		req.RecordID, err = pathRecord(r, req.RecordID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ack, err := s.annotations.Feedback(r.Context(), req)
	s.writeAck(w, r, ack, err, req.TenantID, req.RecordID)
}

// handleLinks serves GET /v1/records/{id}/links: what the ledger holds
// about the record (superseded_by, retracted, feedback, its last replay).
func (s *Server) handleLinks(w http.ResponseWriter, r *http.Request) {
	if s.annotations == nil {
		s.writeError(w, r, errNoAnnotations)
		return
	}
	tenantID, err := queryTenant(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	links, err := s.annotations.Links(r.Context(), tenantID, id)
	if err == nil && (links == nil || links.RecordID != id) {
		err = errors.New("Links returned nothing about this record")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, links)
}

// recordedReplay is the answer of POST /v1/records/{id}/replay: the
// replay and the record sealed for its result.
type recordedReplay struct {
	Result *writ.ReplayResult  `json:"result"`
	Record *writ.AnnotationAck `json:"record"`
}

// handleRecordReplay serves POST /v1/records/{id}/replay: replay the
// record and seal the result as a record (decision key "replay:<key>").
func (s *Server) handleRecordReplay(w http.ResponseWriter, r *http.Request) {
	if s.replays == nil {
		s.writeError(w, r, errNoReplays)
		return
	}
	if s.annotations == nil {
		s.writeError(w, r, errNoAnnotations)
		return
	}
	tenantID, err := queryTenant(r)
	if err == nil {
		err = noBody(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	res, err := s.replays.Replay(r.Context(), tenantID, id)
	if err == nil {
		err = checkReplay(res, tenantID, id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ack, err := s.annotations.RecordReplay(r.Context(), res)
	if err == nil && (ack == nil || ack.About != id) {
		err = errors.New("RecordReplay returned no acknowledgement of this record")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.setTraceparent(w, r, ack.TraceID, sampledFlag)
	s.writeJSON(w, r, http.StatusCreated, recordedReplay{Result: res, Record: ack})
}
