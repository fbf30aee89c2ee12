package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/writhq/writ"
)

// problemTypePrefix prefixes the writ error code in a problem's type URI.
const problemTypePrefix = "urn:writ:problem:"

// Media types of the API.
const (
	mediaJSON    = "application/json"
	mediaProblem = "application/problem+json"
)

// problem is an RFC 9457 problem details object, with writ's error code
// and details as extension members.
type problem struct {
	Type     string        `json:"type"`
	Title    string        `json:"title"`
	Status   int           `json:"status"`
	Detail   string        `json:"detail,omitempty"`
	Instance string        `json:"instance,omitempty"`
	Code     string        `json:"code"`
	Errors   []writ.Detail `json:"errors,omitempty"`
}

// problemKind is what the API says about one writ error code.
type problemKind struct {
	status int
	title  string
}

// problemKinds maps writ error codes to HTTP. It is the only place where
// error codes become statuses; statusOf and codeOf read it.
var problemKinds = map[string]problemKind{
	writ.EINVALID:         {http.StatusBadRequest, "Invalid request"},
	writ.EUNAUTHENTICATED: {http.StatusUnauthorized, "Unauthorized"},
	writ.EFORBIDDEN:       {http.StatusForbidden, "Forbidden"},
	writ.ENOTFOUND:        {http.StatusNotFound, "Not found"},
	writ.ECONFLICT:        {http.StatusConflict, "Conflict"},
	writ.ETOOLARGE:        {http.StatusRequestEntityTooLarge, "Request too large"},
	writ.EUNAVAILABLE:     {http.StatusServiceUnavailable, "Service unavailable"},
	writ.EINTERNAL:        {http.StatusInternalServerError, "Internal error"},
	writ.ERATELIMITED:     {http.StatusTooManyRequests, "Too many requests"},
}

// statusOf returns the HTTP status of a writ error code. Unknown codes are
// internal errors.
func statusOf(code string) int {
	if k, ok := problemKinds[code]; ok {
		return k.status
	}
	return http.StatusInternalServerError
}

// codeOf returns the writ error code of an HTTP status, for answers that
// carry no code (a proxy's error page, say). Gateway failures are
// unavailability: the request can be retried.
func codeOf(status int) string {
	switch status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return writ.EUNAVAILABLE
	case http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return writ.EINVALID
	}
	for code, k := range problemKinds {
		if k.status == status && code != writ.EINTERNAL {
			return code
		}
	}
	return writ.EINTERNAL
}

// writeError answers with the problem for err, at the status its code maps
// to (a body that is not JSON is 415). Internal errors (and unknown codes)
// are logged and shown only as "internal error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := writ.ErrorCode(err)
	if code == writ.EINTERNAL && clientGone(r, err) {
		s.logClientGone(r, err)
		return
	}
	if _, known := problemKinds[code]; !known || code == writ.EINTERNAL {
		s.log.ErrorContext(r.Context(), "internal error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
		// Stored data that fails its hash is named to the caller (its
		// own tenant's record and hashes): whoever is about to act on
		// it must see that it was tampered with.
		if we := (*writ.Error)(nil); !errors.Is(err, writ.ErrIntegrity) || !errors.As(err, &we) {
			err = writ.Errorf(writ.EINTERNAL, "internal error")
		} else {
			err = writ.Errorf(writ.EINTERNAL, "%s", we.Message)
		}
		code = writ.EINTERNAL
	}
	status := statusOf(code)
	if errors.Is(err, errUnsupportedMediaType) {
		status = http.StatusUnsupportedMediaType
	}
	s.writeProblem(w, r, status, err)
}

// writeProblem answers with the problem for err at the given status. It is
// used directly only for 405, a status of the HTTP layer itself; everything
// else goes through writeError.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, status int, err error) {
	code := writ.ErrorCode(err)
	p := problem{
		Type:     problemTypePrefix + code,
		Title:    problemKinds[code].title,
		Status:   status,
		Detail:   writ.ErrorMessage(err),
		Instance: r.URL.Path,
		Code:     code,
		Errors:   writ.ErrorDetails(err),
	}
	switch code {
	case writ.EUNAVAILABLE:
		w.Header().Set("Retry-After", "1")
	case writ.EUNAUTHENTICATED:
		w.Header().Set("WWW-Authenticate", authChallenge)
	}
	body, _ := json.Marshal(p) // a problem always marshals
	writeBody(w, status, mediaProblem, body)
}

// writeBody writes a complete response.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}

// clientGone reports whether err is the request's context canceled
// because its client went away (closed the connection, or gave up): the
// client's doing, not the server's.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// logClientGone logs a request its client abandoned. It is answered with
// nothing: no one is there to read an answer.
func (s *Server) logClientGone(r *http.Request, err error) {
	s.log.InfoContext(r.Context(), "client closed the request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
}
