package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/keyring"
)

func TestEnvelope(t *testing.T) {
	env := func(fake *fakeService) []byte { return fake.blobs[fake.record.Record.Replay.ReplayPacketID] }
	for _, tt := range []struct {
		name   string
		change func(*fakeService)
		status int
		code   string
		detail string // a regular expression the problem's detail matches
	}{
		{"served as stored", func(*fakeService) {}, 200, "", ""},
		{"another tenant's record", func(f *fakeService) { f.owners = map[string]string{"r1": "globex"} }, 404, writ.ENOTFOUND, ""},
		// A tampered envelope is named, with what was expected and
		// found, not hidden behind "internal error": an approver must
		// learn that the request they review was changed.
		{"a blob that does not hash to its address", func(f *fakeService) {
			f.blobs[f.record.Record.Replay.ReplayPacketID] = []byte(`{"tool":"payments.issue_refund","arguments":{"amount":1}}`)
		}, 500, writ.EINTERNAL, `^the stored request envelope of record r1 fails its hash: the record pins sha256:[0-9a-f]{64}, the stored bytes hash to sha256:[0-9a-f]{64}; it is not served`},
		{"no stored envelope", func(f *fakeService) { f.blobs = nil }, 404, writ.ENOTFOUND, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := fullService()
			want := env(fake)
			tt.change(fake)
			s, _ := newTestServer(fake, Config{Envelopes: fake.Envelope})
			req := newRequest(http.MethodGet, "/v1/records/r1/envelope?tenant_id=acme", "")
			rec := serve(s, req)
			if tt.status != 200 {
				p := readProblem(t, rec, req, tt.status, tt.code)
				if tt.detail != "" && !regexp.MustCompile(tt.detail).MatchString(p.Detail) {
					t.Errorf("detail = %q, want it to match %s", p.Detail, tt.detail)
				}
				return
			}
			if rec.Code != 200 || rec.Body.String() != string(want) {
				t.Fatalf("envelope = %d %s, want 200 %s", rec.Code, rec.Body, want)
			}
			if got := rec.Header().Get("Cache-Control"); got != cacheImmutable {
				t.Errorf("Cache-Control = %q, want %q", got, cacheImmutable)
			}
		})
	}
	fake := fullService()
	s, _ := newTestServer(fake, Config{})
	req := newRequest(http.MethodGet, "/v1/records/r1/envelope?tenant_id=acme", "")
	readProblem(t, serve(s, req), req, 404, writ.ENOTFOUND)
}

func TestVerifierKeys(t *testing.T) {
	fake := fullService()
	s, _ := newTestServer(fake, Config{VerifierKeys: fake.VerifierKeys})
	rec := serve(s, newRequest(http.MethodGet, "/v1/ledger/keys?tenant_id=acme", ""))
	var body struct{ Keys []keyring.Key }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("keys = %d %s (%v)", rec.Code, rec.Body, err)
	}
	if len(body.Keys) != 1 || body.Keys[0].VerifierKey != fake.keys[0].VerifierKey {
		t.Errorf("keys = %+v, want %+v", body.Keys, fake.keys)
	}
	for _, target := range []string{"/v1/ledger/keys", "/v1/ledger/keys?tenant_id=acme&size=3"} {
		req := newRequest(http.MethodGet, target, "")
		readProblem(t, serve(s, req), req, 400, writ.EINVALID)
	}
	fake.keys = nil
	if rec := serve(s, newRequest(http.MethodGet, "/v1/ledger/keys?tenant_id=acme", "")); rec.Body.String() != `{"keys":[]}` {
		t.Errorf("no keys = %s, want an empty list", rec.Body)
	}
	s, _ = newTestServer(fake, Config{})
	req := newRequest(http.MethodGet, "/v1/ledger/keys?tenant_id=acme", "")
	readProblem(t, serve(s, req), req, 404, writ.ENOTFOUND)
}
