package pack_test

import (
	"io/fs"
	"os"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// examplePacks are the example packs' files, by pack.
func examplePacks(f *testing.F) []fstest.MapFS {
	var out []fstest.MapFS
	for _, dir := range []string{"../examples/refund", "../examples/wf-2302", "../examples/storybook"} {
		m := fstest.MapFS{}
		err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(dir + "/" + p)
			m[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// FuzzLoadPack replaces one file of an example pack (its manifest, a
// spec, a policy, its controls, tools, a workflow or its workflow
// policies) with fuzzed bytes. Loading must never panic; a pack that does
// not load is an EINVALID error; a pack that loads hashes the same when
// loaded again, and compiling it never panics.
func FuzzLoadPack(f *testing.F) {
	packs := examplePacks(f)
	for i, m := range packs {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range m {
				if !yield(n) {
					return
				}
			}
		})
		for j, n := range names {
			f.Add(uint8(i), uint8(j), m[n].Data)
		}
	}
	f.Fuzz(func(t *testing.T, which, file uint8, data []byte) {
		src := packs[int(which)%len(packs)]
		names := make([]string, 0, len(src))
		for n := range src {
			names = append(names, n)
		}
		slices.Sort(names)
		m := fstest.MapFS{}
		for n, f := range src {
			m[n] = f
		}
		m[names[int(file)%len(names)]] = &fstest.MapFile{Data: data}
		p, err := pack.LoadFS(m, "fuzz")
		if err != nil {
			if writ.ErrorCode(err) != writ.EINVALID {
				t.Fatalf("LoadFS error is not EINVALID: %v", err)
			}
			return
		}
		again, err := pack.LoadFS(m, "fuzz")
		if err != nil || again.Hash != p.Hash {
			t.Fatalf("the same files loaded twice: hash %s, then %v (%v)", p.Hash, again, err)
		}
		_, _ = policy.Compile(p)
	})
}

// FuzzLoadTests replaces the refund example's test file with fuzzed
// bytes (its requests are merge patches whose nulls are lifted before the
// schema check, and its cases may carry before: checks). Loading must
// never panic, and a file that does not load is an EINVALID error.
func FuzzLoadTests(f *testing.F) {
	src := examplePacks(f)[0]
	p, err := pack.LoadFS(src, "refund")
	if err != nil {
		f.Fatal(err)
	}
	for n, file := range src {
		if matched, _ := fs.Glob(src, pack.TestsPattern); slices.Contains(matched, n) {
			f.Add(file.Data)
		}
	}
	f.Add([]byte("cases:\n  - name: x\n    now: 2026-05-09T09:31:42Z\n    request_file: requests/refund-allow.json\n    request: {evidence: null, arguments: {amount_inr: null}}\n    before: [{request: {tool: null}, repeat: 2}]\n    expect: {outcome: allow}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := fstest.MapFS{}
		for n, file := range src {
			m[n] = file
		}
		m["tests/fuzz.yaml"] = &fstest.MapFile{Data: data}
		if _, err := pack.LoadTestsFS(m, "fuzz", p); err != nil && writ.ErrorCode(err) != writ.EINVALID {
			t.Fatalf("LoadTestsFS error is not EINVALID: %v", err)
		}
	})
}
