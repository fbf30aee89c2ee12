package packdiff_test

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packdiff"
)

// TestDefinitionDigestDirections: pinning a tool's definition tightens,
// unpinning loosens, and a new pin is for review.
func TestDefinitionDigestDirections(t *testing.T) {
	const d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	withPin := func(digest string) *pack.Pack {
		t.Helper()
		src := os.DirFS("../gateway/testdata/pack")
		m := fstest.MapFS{}
		err := fs.WalkDir(src, ".", func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			data, err := fs.ReadFile(src, path)
			if path == "tools.yaml" && digest != "" {
				data = []byte(strings.Replace(string(data), "  - name: fs.read_file\n", "  - name: fs.read_file\n    definition_digest: "+digest+"\n", 1))
			}
			m[path] = &fstest.MapFile{Data: data}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pack.LoadFS(m, "pack")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ from, to, want string }{
		{"", d1, packdiff.Tightened},
		{d1, "", packdiff.Loosened},
		{d1, d2, ""},
	} {
		d := packdiff.Compare(withPin(tc.from), withPin(tc.to))
		var got []string
		for _, c := range d.Changes {
			if c.Subject == "tool fs.read_file" && c.What == "definition_digest" {
				got = append(got, c.Direction)
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("Compare(pin %q → %q) definition_digest directions = %q, want [%q]", tc.from, tc.to, got, tc.want)
		}
	}
}
