package witness_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/writhq/writ/witness"
)

// cosigner is a witness key pair for fake witnesses.
type cosigner struct {
	signer note.Signer
	key    witness.Key
}

func newCosigner(t *testing.T, name string) cosigner {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := witness.ParseKey(cv)
	if err != nil {
		t.Fatal(err)
	}
	return cosigner{s, k}
}

// cosign returns the signature line of c over the checkpoint in an
// add-checkpoint request body.
func (c cosigner) cosign(t *testing.T, body []byte) []byte {
	t.Helper()
	_, cp, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		t.Fatalf("request body %q has no empty line", body)
	}
	_, err := note.Open(cp, note.VerifierList())
	var u *note.UnverifiedNoteError
	if !errors.As(err, &u) {
		t.Fatalf("request checkpoint: %v", err)
	}
	signed, err := note.Sign(&note.Note{Text: u.Note.Text}, c.signer)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(signed, []byte("\n"))
	return lines[len(lines)-2]
}

// TestClientAnswers: each answer a witness may give, from a fake witness,
// and what the client makes of it.
func TestClientAnswers(t *testing.T) {
	l := newLog(t)
	cp := l.append(t, "acme", 1, 4)
	good := newCosigner(t, "w.example/good")
	other := newCosigner(t, "w.example/other")

	type answer struct {
		status int
		ctype  string
		body   func(t *testing.T, req []byte) []byte
	}
	fixed := func(s string) func(*testing.T, []byte) []byte {
		return func(*testing.T, []byte) []byte { return []byte(s) }
	}
	for _, tc := range []struct {
		name     string
		answers  []answer
		old      int64
		want     string // substring of the error; "" for success
		conflict bool
	}{
		{name: "cosigned", answers: []answer{{200, "", good.cosign}}},
		{name: "cosigned beside another key's line", answers: []answer{{200, "", func(t *testing.T, req []byte) []byte {
			return append(other.cosign(t, req), good.cosign(t, req)...)
		}}}},
		{name: "only another key's line", answers: []answer{{200, "", other.cosign}}, want: "without a cosignature by its key"},
		{name: "a forged line in the witness's name", answers: []answer{{200, "", func(t *testing.T, req []byte) []byte {
			line := good.cosign(t, req)
			line[len(line)-3] ^= 1
			return line
		}}}, want: "does not verify"},
		{name: "garbage", answers: []answer{{200, "", fixed("hello\n")}}, want: "garbage"},
		{name: "empty 200", answers: []answer{{200, "", fixed("")}}, want: "garbage"},
		{name: "409, then cosigned", answers: []answer{{409, "text/x.tlog.size", fixed("0\n")}, {200, "", good.cosign}}, old: 2},
		{name: "409 larger than ours", answers: []answer{{409, "text/x.tlog.size", fixed("9\n")}}, want: "larger than the ledger's newest checkpoint", conflict: true},
		{name: "409 twice", answers: []answer{{409, "text/x.tlog.size", fixed("1\n")}, {409, "text/x.tlog.size", fixed("2\n")}}, want: "409", conflict: false},
		{name: "409 without its type", answers: []answer{{409, "text/plain", fixed("1\n")}}, want: "not text/x.tlog.size"},
		{name: "409 with garbage", answers: []answer{{409, "text/x.tlog.size", fixed("01\n")}}, want: "not a tree size"},
		{name: "422 from a size it saw", answers: []answer{{409, "text/x.tlog.size", fixed("2\n")}, {422, "", fixed("")}}, want: "refused the consistency", conflict: true},
		{name: "404", answers: []answer{{404, "", fixed("")}}, want: `does not know the log "writ/acme" (404)`},
		{name: "403", answers: []answer{{403, "", fixed("")}}, want: "does not trust the key that signed the checkpoint of acme (403)"},
		{name: "400", answers: []answer{{400, "", fixed("")}}, want: "as malformed (400)"},
		{name: "429", answers: []answer{{429, "", fixed("")}}, want: "answered 429 Too Many Requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			var olds []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := io.ReadAll(r.Body)
				first, _ := bufio.NewReader(bytes.NewReader(req)).ReadString('\n')
				olds = append(olds, strings.TrimSpace(first))
				if r.Method != http.MethodPost || r.URL.Path != "/add-checkpoint" || n >= len(tc.answers) {
					http.Error(w, "unexpected", http.StatusTeapot)
					return
				}
				a := tc.answers[n]
				n++
				if a.ctype != "" {
					w.Header().Set("Content-Type", a.ctype)
				}
				w.WriteHeader(a.status)
				w.Write(a.body(t, req))
			}))
			defer srv.Close()
			c, err := witness.NewClient(witness.Config{Witnesses: []witness.Witness{{URL: srv.URL, Key: good.key}}, Store: l.st})
			if err != nil {
				t.Fatal(err)
			}
			co, err := c.Submit(context.Background(), 0, cp, tc.old)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Submit = %v, want a cosignature", err)
				}
				if _, err := witness.Verify(cp.Note, co.Line, good.key); err != nil || co.Size != cp.Size {
					t.Errorf("Submit = cosignature of size %d (Verify: %v), want a valid one of size %d", co.Size, err, cp.Size)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Submit = %v, want an error saying %q (requests: %q)", err, tc.want, olds)
			}
			if got := errors.Is(err, witness.ErrConflict); got != tc.conflict {
				t.Errorf("Submit = %v: conflict %v, want %v", err, got, tc.conflict)
			}
		})
	}
	// The 409 case sent "old 2", then "old 0" from the witness's size: checked
	// by its success above, since a fake answering the second request is
	// reached only after the first.
}

func TestClientWitnessDown(t *testing.T) {
	l := newLog(t)
	l.append(t, "acme", 1, 4)
	good := newCosigner(t, "w.example/good")
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c, err := witness.NewClient(witness.Config{Witnesses: []witness.Witness{{URL: url, Key: good.key}}, Store: l.st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SubmitAll(context.Background()); err == nil || errors.Is(err, witness.ErrConflict) {
		t.Fatalf("SubmitAll(witness down) = %v, want a plain error", err)
	}
	s := c.Status()[0]
	if s.Behind != 1 || s.LastError == "" || len(s.Conflicts) != 0 {
		t.Errorf("Status() = %+v, want acme behind, the error, and no conflict", s)
	}
}

func TestParseKey(t *testing.T) {
	good := newCosigner(t, "w.example/good").key.Text
	_, plain, err := note.GenerateKey(rand.Reader, "w.example/plain")
	if err != nil {
		t.Fatal(err)
	}
	name, rest, _ := strings.Cut(good, "+")
	hash, key, _ := strings.Cut(rest, "+")
	for _, tc := range []struct {
		text, want string
	}{
		{good, ""},
		{" " + good + "\n", ""},
		{plain, "type 0x01"},
		{name + "+" + hash, "not <name>+<hash>+<key>"},
		{name + "+00000000+" + key, "its key hash should be " + hash},
		{name + "+" + hash + "+" + key + "=", "not base64"},
		{name + "+" + strings.ToUpper(hash) + "x+" + key, "8 hex digits"},
		{"+" + hash + "+" + key, "not <name>+<hash>+<key>"},
	} {
		_, err := witness.ParseKey(tc.text)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ParseKey(%q) = %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	k := newCosigner(t, "w.example/good").key.Text
	for _, tc := range []struct {
		json, want string
	}{
		{`{"witnesses":[{"url":"https://w.example/","key":"` + k + `"}]}`, ""},
		{`{"witnesses":[]}`, "lists no witness"},
		{`{"witnesses":[{"url":"ftp://w.example","key":"` + k + `"}]}`, "not an http or https URL"},
		{`{"witnesses":[{"url":"https://w.example","key":"` + k + `","name":"x"}]}`, "unknown field"},
		{`{"witnesses":[{"url":"https://a.example","key":"` + k + `"},{"url":"https://b.example","key":"` + k + `"}]}`, "listed twice"},
		{`{"witnesses":[{"url":"https://w.example","key":"nope"}]}`, "witnesses[0]"},
		{`{"witnesses":[{"url":"https://w.example","key":"` + k + `"}]} {}`, "trailing data"},
	} {
		ws, err := witness.ParseConfig([]byte(tc.json))
		if tc.want == "" {
			if err != nil || len(ws) != 1 || ws[0].URL != "https://w.example" {
				t.Errorf("ParseConfig(%s) = %+v, %v; want one witness at https://w.example", tc.json, ws, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) = %v, want %q", tc.json, err, tc.want)
		}
	}
}

func FuzzSplitLines(f *testing.F) {
	f.Add([]byte("— w.example/w1 AAAA\n"))
	f.Add([]byte("— a b\n— c d\n"))
	f.Add([]byte("hello"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := witness.SplitLines(data)
		if err != nil {
			return
		}
		if !bytes.Equal(bytes.Join(lines, nil), data) {
			t.Fatalf("SplitLines(%q) lines do not join back to the input", data)
		}
		for _, l := range lines {
			if !bytes.HasPrefix(l, []byte("— ")) || !bytes.HasSuffix(l, []byte("\n")) || bytes.Count(l, []byte("\n")) != 1 {
				t.Fatalf("SplitLines(%q) returned %q", data, l)
			}
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"witnesses":[{"url":"https://w.example/","key":"w+00000000+BAAA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := witness.ParseConfig(data)
		if err == nil && len(ws) == 0 {
			t.Fatalf("ParseConfig(%q) = no witness and no error", data)
		}
	})
}
