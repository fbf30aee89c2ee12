package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// replayRequests returns one valid request of each replay route, in
// development mode.
func replayRequests() []*http.Request {
	return []*http.Request{
		newRequest(http.MethodGet, "/v1/records/r1/replay?tenant_id=acme", ""),
		newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id="+testTraceID, ""),
	}
}

// TestReplayPassesEveryStatus: whatever a replay found, equal, a diff or
// an error, is the answer, with 200 and the result as it came.
func TestReplayPassesEveryStatus(t *testing.T) {
	for _, res := range []*writ.ReplayResult{equalReplay(), diffReplay(), errorReplay()} {
		fake := &fakeService{replay: res}
		s, _ := newTestServer(fake, Config{Replays: fake})
		req := newRequest(http.MethodGet, "/v1/records/"+res.RecordID+"/replay?tenant_id=acme", "")
		rec := serve(s, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s (a %s replay) = %d, want 200; body %s", req.URL, res.Status, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != mediaJSON {
			t.Errorf("GET %s: Content-Type = %q, want %q", req.URL, ct, mediaJSON)
		}
		if got := decodeBody(t, rec.Body.Bytes(), res); !reflect.DeepEqual(got, res) {
			t.Errorf("GET %s: body = %+v, want %+v", req.URL, got, res)
		}
		if got, want := fake.replayArgs(), [][3]string{{"Replay", "acme", res.RecordID}}; !reflect.DeepEqual(got, want) {
			t.Errorf("GET %s: replays called with %q, want %q", req.URL, got, want)
		}
	}
}

func TestReplayTrace(t *testing.T) {
	fake := fullReplays()
	s, _ := newTestServer(fake, Config{Replays: fake})
	req := newRequest(http.MethodGet, "/v1/replay?tenant_id=acme&trace_id="+testTraceID, "")
	rec := serve(s, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200; body %s", req.URL, rec.Code, rec.Body)
	}
	want := &replayResults{Results: fake.replays}
	if got := decodeBody(t, rec.Body.Bytes(), want); !reflect.DeepEqual(got, want) {
		t.Errorf("GET %s: body = %+v, want %+v", req.URL, got, want)
	}
	if got, want := fake.replayArgs(), [][3]string{{"ReplayTrace", "acme", testTraceID}}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET %s: replays called with %q, want %q", req.URL, got, want)
	}
}

// TestReplayNotFoundIsARecordNotFound: a record the tenant does not have
// answers the replay route exactly as it answers the record route, but
// for the path it names.
func TestReplayNotFoundIsARecordNotFound(t *testing.T) {
	answer := func(target string) map[string]any {
		fake := fullService()
		fake.owners = map[string]string{"r1": "globex"}
		s, _ := newTestServer(fake, Config{Replays: fake})
		rec := serve(s, newRequest(http.MethodGet, target, ""))
		if rec.Code != http.StatusNotFound {
			t.Fatalf("GET %s = %d, want 404; body %s", target, rec.Code, rec.Body)
		}
		var p map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		delete(p, "instance")
		return p
	}
	replayed, read := answer("/v1/records/r1/replay?tenant_id=acme"), answer("/v1/records/r1?tenant_id=acme")
	if !reflect.DeepEqual(replayed, read) {
		t.Errorf("a record the tenant does not have: the replay route answers %v, the record route %v; want the same problem", replayed, read)
	}
}

func TestReplayBadInput(t *testing.T) {
	tests := []struct {
		target string
		field  string
		msg    string
	}{
		{"/v1/replay?tenant_id=acme", paramTraceID, "is required"},
		{"/v1/replay?tenant_id=acme&trace_id=", paramTraceID, "is required"},
		{"/v1/replay?tenant_id=acme&trace_id=4BF92F3577B34DA6A3CE929D0E0E4736", paramTraceID, "W3C trace id"},
		{"/v1/replay?tenant_id=acme&trace_id=4bf92f3577b34da6a3ce929d0e0e473", paramTraceID, "W3C trace id"},
		{"/v1/replay?tenant_id=acme&trace_id=00000000000000000000000000000000", paramTraceID, "W3C trace id"},
		{"/v1/replay?tenant_id=acme&trace_id=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", paramTraceID, "W3C trace id"},
		{"/v1/replay?tenant_id=acme&trace_id=" + testTraceID + "&trace_id=" + testTraceID, paramTraceID, "at most once"},
		{"/v1/replay?trace_id=" + testTraceID, paramTenantID, "is required"},
		{"/v1/replay?tenant_id=acme&trace_id=" + testTraceID + "&record_id=r1", "record_id", "unknown query parameter"},
		{"/v1/records/r1/replay", paramTenantID, "is required"},
		{"/v1/records/r1/replay?tenant_id=acme&pack=other", "pack", "unknown query parameter"},
	}
	for _, tt := range tests {
		fake := fullReplays()
		s, _ := newTestServer(fake, Config{Replays: fake})
		req := newRequest(http.MethodGet, tt.target, "")
		p := readProblem(t, serve(s, req), req, http.StatusBadRequest, writ.EINVALID)
		if !hasDetail(p, tt.field, tt.msg) {
			t.Errorf("GET %s: errors %+v, want %s %q", tt.target, p.Errors, tt.field, tt.msg)
		}
		if n := fake.calls(); n != 0 {
			t.Errorf("GET %s: replays called %d times, want 0", tt.target, n)
		}
	}
}

func TestNoReplays(t *testing.T) {
	fake := fullReplays()
	s, _ := newTestServer(fake, Config{}) // the fake replays, but the server was given no replays
	reqs := append(replayRequests(), newRequest(http.MethodGet, "/v1/replay?trace_id=nope", ""))
	for _, req := range reqs {
		p := readProblem(t, serve(s, req), req, http.StatusNotFound, writ.ENOTFOUND)
		if p.Detail != errNoReplays.Error() {
			t.Errorf("%s %s: detail = %q, want %q", req.Method, req.URL, p.Detail, errNoReplays.Error())
		}
	}
	if n := fake.calls(); n != 0 {
		t.Errorf("a server without replays called them %d times", n)
	}
}

// TestReplayAnswerGuards: an answer about another tenant's or another
// record than asked for, or with a status the API does not define, is
// never sent; it is an internal error.
func TestReplayAnswerGuards(t *testing.T) {
	with := func(res *writ.ReplayResult, f func(*writ.ReplayResult)) *writ.ReplayResult {
		f(res)
		return res
	}
	globex := func(r *writ.ReplayResult) { r.TenantID = "globex" }
	one, trace := replayRequests()[0], replayRequests()[1]
	tests := []struct {
		name string
		fake *fakeService
		req  *http.Request
	}{
		{"record: nothing", &fakeService{}, one},
		{"record: another tenant", &fakeService{replay: with(equalReplay(), globex)}, one},
		{"record: another record", &fakeService{replay: with(equalReplay(), func(r *writ.ReplayResult) { r.RecordID = "r2" })}, one},
		{"record: no status", &fakeService{replay: with(equalReplay(), func(r *writ.ReplayResult) { r.Status = "" })}, one},
		{"record: another status", &fakeService{replay: with(diffReplay(), func(r *writ.ReplayResult) { r.RecordID, r.Status = "r1", "partial" })}, one},
		{"trace: nothing", &fakeService{}, trace},
		{"trace: another tenant's record", &fakeService{replays: []*writ.ReplayResult{equalReplay(), with(diffReplay(), globex)}}, trace},
		{"trace: a nil result", &fakeService{replays: []*writ.ReplayResult{equalReplay(), nil}}, trace},
		{"trace: another status", &fakeService{replays: []*writ.ReplayResult{with(errorReplay(), func(r *writ.ReplayResult) { r.Status = "skipped" })}}, trace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newTestServer(tt.fake, Config{Replays: tt.fake})
			rec := serve(s, tt.req)
			p := readProblem(t, rec, tt.req, http.StatusInternalServerError, writ.EINTERNAL)
			if p.Detail != "internal error" || strings.Contains(rec.Body.String(), "globex") {
				t.Errorf("%s %s: answer %s, want only \"internal error\"", tt.req.Method, tt.req.URL, rec.Body)
			}
			if !strings.Contains(log.String(), "replays answered") && !strings.Contains(log.String(), "replays returned") {
				t.Errorf("%s %s: the mismatch was not logged:\n%s", tt.req.Method, tt.req.URL, log)
			}
		})
	}
}
