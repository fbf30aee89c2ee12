package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ/auth"
)

func revokedKey(id, tenant string, at time.Time, after int64) *auth.Key {
	return &auth.Key{ID: id, TenantID: tenant, RevokedAt: &at, RevokedAfter: &after}
}

// TestRevocationsBefore checks the digest against sha256sum of the lines
// written by hand (docs/ledger-format.md §5.1 has the same example).
func TestRevocationsBefore(t *testing.T) {
	keys := []*auth.Key{
		// Listed out of key id order, with a zone that is not UTC.
		revokedKey("key_baaqeayeaudaocajbifqydiob4", "acme", time.Date(2026, time.May, 11, 10, 30, 0, 250e6, time.FixedZone("CEST", 2*3600)), 7),
		revokedKey("key_aaaqeayeaudaocajbifqydiob4", "acme", time.Date(2026, time.May, 10, 12, 0, 0, 0, time.UTC), 3),
		{ID: "key_caaqeayeaudaocajbifqydiob4", TenantID: "acme"}, // not revoked
	}
	for _, tc := range []struct {
		size int64
		want Revocations
		line string
	}{
		// printf '' | sha256sum
		{3, Revocations{0, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, ""},
		// printf 'key_aaaqeayeaudaocajbifqydiob4 2026-05-10T12:00:00Z\n' | sha256sum
		{4, Revocations{1, "sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac"},
			"writ-revocations 1 sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac\n"},
		{7, Revocations{1, "sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac"},
			"writ-revocations 1 sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac\n"},
		// ... and the second line, 'key_baaqeayeaudaocajbifqydiob4 2026-05-11T08:30:00.25Z\n'
		{8, Revocations{2, "sha256:907206cb99d908c14b091e0a26459738d240fb0aeb3c09022ffed83d2fe1c505"},
			"writ-revocations 2 sha256:907206cb99d908c14b091e0a26459738d240fb0aeb3c09022ffed83d2fe1c505\n"},
	} {
		got := RevocationsBefore(keys, tc.size)
		if got != tc.want || got.Line() != tc.line {
			t.Errorf("RevocationsBefore(size %d) = %+v, line %q; want %+v, line %q", tc.size, got, got.Line(), tc.want, tc.line)
		}
	}
}

func TestCheckpointRevocations(t *testing.T) {
	const head = "writ/acme\n8\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	const digest = "sha256:907206cb99d908c14b091e0a26459738d240fb0aeb3c09022ffed83d2fe1c505"
	none := RevocationsBefore(nil, 0)
	for _, tc := range []struct {
		name, text string
		want       Revocations
		err        string // a part of the error; "" for none
	}{
		{"NoLine", head, none, ""},
		{"Line", head + "writ-revocations 2 " + digest + "\n", Revocations{2, digest}, ""},
		{"AnotherExtensionBeside", head + "example.com/other 1\nwrit-revocations 2 " + digest + "\n", Revocations{2, digest}, ""},
		{"TwoLines", head + "writ-revocations 2 " + digest + "\nwrit-revocations 2 " + digest + "\n", Revocations{}, "2 revocations lines"},
		{"ZeroCount", head + "writ-revocations 0 " + digest + "\n", Revocations{}, "bad revocation count"},
		{"LeadingZero", head + "writ-revocations 02 " + digest + "\n", Revocations{}, "bad revocation count"},
		{"UpperHex", head + "writ-revocations 2 " + strings.ToUpper(digest[:8]) + digest[8:] + "\n", Revocations{}, "bad revocations digest"},
		{"ShortDigest", head + "writ-revocations 2 " + digest[:70] + "\n", Revocations{}, "bad revocations digest"},
		{"NotHex", head + "writ-revocations 2 " + digest[:70] + "g\n", Revocations{}, "bad revocations digest"},
		{"ExtraField", head + "writ-revocations 2 " + digest + " x\n", Revocations{}, "bad revocations line"},
		{"DoubleSpace", head + "writ-revocations 2  " + digest + "\n", Revocations{}, "bad revocations line"},
		{"EmptyExtension", head + "\n", Revocations{}, "empty extension line"},
		{"NoFinalNewline", head + "writ-revocations 2 " + digest, Revocations{}, "does not end in a newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckpointRevocations(tc.text)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Errorf("CheckpointRevocations = %+v, %v; want %+v", got, err, tc.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CheckpointRevocations = %+v, %v; want an error with %q", got, err, tc.err)
			}
			// ParseCheckpointText accepts the same extension lines (it
			// does not read writ's), and refuses malformed ones.
			_, size, _, perr := ParseCheckpointText(tc.text)
			malformed := strings.Contains(tc.err, "extension line") || strings.Contains(tc.err, "newline")
			if malformed != (perr != nil) || (perr == nil && size != 8) {
				t.Errorf("ParseCheckpointText = size %d, %v; want an error: %v", size, perr, malformed)
			}
		})
	}
}

// FuzzCheckpointRevocations: whatever a checkpoint's text, reading its
// revocations never panics, and what it reads is written back as the
// very line it came from.
func FuzzCheckpointRevocations(f *testing.F) {
	const head = "writ/acme\n8\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	f.Add(head)
	f.Add(head + "writ-revocations 2 sha256:907206cb99d908c14b091e0a26459738d240fb0aeb3c09022ffed83d2fe1c505\n")
	f.Add(head + "other\nwrit-revocations 1 sha256:80c6eaa466c143a937198a918ccc77ecab1102608baab1aab9d3a198ca6a2cac\n")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := CheckpointRevocations(text)
		if err != nil {
			return
		}
		ext, err := checkpointExtensions(text)
		if err != nil {
			t.Fatalf("read %+v from %q, whose extension lines are malformed: %v", r, text, err)
		}
		var lines []string
		for _, l := range ext {
			if strings.HasPrefix(l, revocationsPrefix) {
				lines = append(lines, l+"\n")
			}
		}
		switch {
		case r.Count == 0 && (len(lines) != 0 || r != RevocationsBefore(nil, 0)):
			t.Fatalf("read %+v from %q, with revocations lines %q", r, text, lines)
		case r.Count > 0 && (len(lines) != 1 || lines[0] != r.Line()):
			t.Fatalf("read %+v, whose line %q is not the one of %q", r, r.Line(), text)
		}
	})
}
