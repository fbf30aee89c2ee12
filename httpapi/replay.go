package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/writhq/writ"
)

// errNoReplays answers the replay routes of a server that replays nothing.
var errNoReplays = writ.Errorf(writ.ENOTFOUND, "this server replays no records")

// replayStatuses are the statuses a replay result may have on the wire.
var replayStatuses = []string{writ.ReplayEqual, writ.ReplayDiff, writ.ReplayError, writ.ReplayInputsErased}

// replayResults is the body of GET /v1/replay: the replay of every record
// of a trace, in chain order.
type replayResults struct {
	Results []*writ.ReplayResult `json:"results"`
}

// replayPath is the path of a record's replay.
func replayPath(recordID string) string {
	return "/v1/records/" + url.PathEscape(recordID) + "/replay"
}

// handleReplay serves GET /v1/records/{id}/replay: the record replayed on
// its pinned inputs. Whatever the replay found is the answer, with 200:
// replay_equal, a diff, or an error (inputs this writ cannot decide
// again) are findings about the record, not failures of the request. A
// record the tenant does not have is 404, as on GET /v1/records/{id}.
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	if s.replays == nil {
		s.writeError(w, r, errNoReplays)
		return
	}
	tenantID, err := queryTenant(r)
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
	s.writeJSON(w, r, http.StatusOK, res)
}

// handleReplayTrace serves GET /v1/replay: every record of a trace
// replayed, in chain order. A trace the tenant has no records of is 404.
func (s *Server) handleReplayTrace(w http.ResponseWriter, r *http.Request) {
	if s.replays == nil {
		s.writeError(w, r, errNoReplays)
		return
	}
	values, err := scopedQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID, traceID, err := parseReplayTraceQuery(values)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := s.replays.ReplayTrace(r.Context(), tenantID, traceID)
	if err == nil && len(results) == 0 {
		// writ.Replays: a trace without records is ENOTFOUND.
		err = fmt.Errorf("replays returned neither results nor an error for trace %s", traceID)
	}
	for i := 0; err == nil && i < len(results); i++ {
		err = checkReplay(results[i], tenantID, "")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, replayResults{Results: results})
}

// checkReplay checks what the replays answered for record recordID of
// tenantID ("" for any record of the tenant): an answer about another
// tenant's or another record than asked for must never be sent, and
// neither may a status the API does not define.
func checkReplay(res *writ.ReplayResult, tenantID, recordID string) error {
	switch {
	case res == nil:
		return errors.New("replays returned neither a result nor an error")
	case res.TenantID != tenantID || (recordID != "" && res.RecordID != recordID):
		return fmt.Errorf("replays answered record %q of tenant %q with record %q of tenant %q", recordID, tenantID, res.RecordID, res.TenantID)
	case !slices.Contains(replayStatuses, res.Status):
		return fmt.Errorf("replays answered record %q with the status %q, which is none of %q", res.RecordID, res.Status, replayStatuses)
	}
	return nil
}
