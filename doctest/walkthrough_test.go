package doctest

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

var update = flag.Bool("update", false, "rewrite the output blocks of README.md and docs/tutorials/*.md that differ from what the commands print")

// A walkthrough is a Markdown file whose ```sh blocks are run, in
// order, each by bash in one working directory, and whose ```json or
// ```text block after a ```sh block (before the next one) is what that
// block prints on stdout. These rules are the contract between the docs
// and this test:
//
//   - A ```sh block whose only command is `writ serve …` (or `go run
//     ./cmd/writ serve …`) starts a server in the background, on a free
//     loopback port that replaces the one of its --addr (8080 by
//     default) in every later block; the test waits for its /readyz and
//     stops it when the walkthrough ends.
//   - `go run ./cmd/writ` runs the built binary, as `writ` does, and
//     $WRIT_SERVER names the server that stands for 127.0.0.1:8080.
//   - A block right after the comment <!-- doctest: skip … --> is shown
//     but not run (the README's two commands).
//   - Ids, times, durations, hashes, signatures and tokens are masked in
//     both the shown and the printed output before they are compared, so
//     the docs can show real output.
//
// Every walkthrough starts in its own empty directory, holding only a
// link to examples/, with bash, curl and jq on the PATH: what one
// walkthrough does can never change another's.
type walkthrough struct {
	path   string // the Markdown file
	name   string // the script's name, from the path
	blocks []block
}

type block struct {
	kind       string // "sh", "serve" or "skip"
	text       string // the commands
	line       int    // where the block starts (1-based, the fence)
	out        *outBlock
	serveArgs  []string
	servePort  string
	serveIndex int
}

type outBlock struct {
	text       string
	start, end int // the lines between the fences, 0-based, end exclusive
}

var (
	fenceLine = regexp.MustCompile("^(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	skipNote  = regexp.MustCompile(`^<!--\s*doctest:\s*skip\b`)
	serveCmd  = regexp.MustCompile(`^(?:go run \./cmd/writ|writ) serve(\s.*)?$`)
)

// parseWalkthrough reads the runnable blocks of a Markdown file.
func parseWalkthrough(path string) (*walkthrough, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(repoRoot, path)
	w := &walkthrough{path: path, name: strings.NewReplacer("/", "_", ".md", "").Replace(filepath.ToSlash(rel))}
	lines := strings.Split(string(b), "\n")
	lastText := ""
	var last *block
	for i := 0; i < len(lines); i++ {
		m := fenceLine.FindStringSubmatch(lines[i])
		if m == nil {
			if t := strings.TrimSpace(lines[i]); t != "" {
				lastText = t
			}
			continue
		}
		fence, info := m[1], m[2]
		start := i + 1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[end], " "), fence) {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: unclosed code block", rel, i+1)
		}
		body := strings.Join(lines[start:end], "\n") + "\n"
		switch info {
		case "sh":
			bl := block{kind: "sh", text: body, line: i + 1}
			if skipNote.MatchString(lastText) {
				bl.kind = "skip"
			} else if cmd := strings.TrimSpace(strings.ReplaceAll(body, "\\\n", " ")); !strings.Contains(cmd, "\n") && serveCmd.MatchString(cmd) {
				bl.kind = "serve"
				bl.serveArgs = strings.Fields(serveCmd.FindStringSubmatch(cmd)[1])
				bl.servePort = "8080"
				for j, a := range bl.serveArgs {
					if (a == "--addr" || a == "-addr") && j+1 < len(bl.serveArgs) {
						_, bl.servePort, _ = net.SplitHostPort(bl.serveArgs[j+1])
					}
				}
			} else if strings.Contains(body, " serve") && regexp.MustCompile(`(?m)^\s*(?:go run \./cmd/writ|writ) serve\b`).MatchString(body) {
				return nil, fmt.Errorf("%s:%d: a `writ serve` must be alone in its block, so that the test can run it in the background", rel, i+1)
			}
			w.blocks = append(w.blocks, bl)
			last = &w.blocks[len(w.blocks)-1]
		case "json", "text":
			if last != nil && last.kind == "sh" {
				if last.out != nil {
					return nil, fmt.Errorf("%s:%d: a second output block for the commands at line %d; put prose-only examples in another language tag", rel, i+1, last.line)
				}
				last.out = &outBlock{text: body, start: start, end: end}
			}
		}
		lastText = ""
		i = end
	}
	return w, nil
}

// masks hide what differs from run to run. They apply to the shown and
// the printed output alike.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`writ-\d{4}-\d\d-\d\dT\d{6}Z\+[0-9a-f]{8}`), "<key-name>"},
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`\b([a-z]+)_[0-9a-z]{26}\b`), "${1}_<id>"},
	{regexp.MustCompile(`sha256:[0-9a-f]{64}`), "sha256:<hash>"},
	{regexp.MustCompile(`\bhmac-sha256:[0-9a-f]{64}`), "hmac-sha256:<hash>"},
	{regexp.MustCompile(`\b[0-9a-f]{32,}\b`), "<hex>"},
	{regexp.MustCompile(`\bwrit_[A-Za-z0-9_-]{20,}`), "<token>"},
	{regexp.MustCompile(`[A-Za-z0-9+/]{40,}={0,2}`), "<base64>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`\b\d+ checkpoints?\b`), "<n> checkpoints"},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return s
}

// TestMask pins what is masked and what is not.
func TestMask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`"decision_id": "dec_01m8g7p8c1t4m3cchmdpszw1ea"`, `"decision_id": "dec_<id>"`},
		{"verified in 21ms", "verified in <duration>"},
		{"at 2026-05-09T09:31:42Z by writ-2026-11-28T043033Z+84ff4c59", "at <time> by <key-name>"},
		{`"tree_size": 4`, `"tree_size": 4`},
		{"4 records of 1 tenant and 2 checkpoints", "4 records of 1 tenant and <n> checkpoints"},
		{`"outcome": "allow"`, `"outcome": "allow"`},
	} {
		if got := mask(c.in); got != c.want {
			t.Errorf("mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// walkthroughFiles are the README and every tutorial.
func walkthroughFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "tutorials", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{filepath.Join(repoRoot, "README.md")}
	for _, f := range files {
		if filepath.Base(f) != "README.md" {
			out = append(out, f)
		}
	}
	return out
}

// freePort asks the kernel for a loopback port nobody holds. The
// server that gets it binds it a moment later; waitready reports
// plainly if another process took it in between.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// script translates a walkthrough into a testscript.
func (w *walkthrough) script(t *testing.T) []byte {
	var ar txtar.Archive
	var s strings.Builder
	w.translate(t, "", &s, &ar)
	ar.Comment = []byte(s.String())
	return txtar.Format(&ar)
}

// translate appends a walkthrough's commands to a script, and its block
// files, named with prefix, to an archive. It ends by stopping the
// walkthrough's servers with an interrupt and waiting for them: a
// server that does not shut down cleanly fails the script.
func (w *walkthrough) translate(t *testing.T, prefix string, s *strings.Builder, ar *txtar.Archive) {
	ports := map[string]string{} // a port the docs show → the port the test uses
	replace := func(text string) string {
		text = strings.ReplaceAll(text, "go run ./cmd/writ ", "writ ")
		for from, to := range ports {
			text = strings.ReplaceAll(text, "127.0.0.1:"+from, "127.0.0.1:"+to)
			text = strings.ReplaceAll(text, "localhost:"+from, "localhost:"+to)
		}
		return text
	}
	servers := 0
	for i, b := range w.blocks {
		id := fmt.Sprintf("%s%d", prefix, i)
		switch b.kind {
		case "skip":
			continue
		case "serve":
			port := freePort(t)
			ports[b.servePort] = port
			args := []string{"serve"}
			hasAddr := false
			for j := 0; j < len(b.serveArgs); j++ {
				a := b.serveArgs[j]
				if (a == "--addr" || a == "-addr") && j+1 < len(b.serveArgs) {
					args = append(args, a, "127.0.0.1:"+port)
					j++
					hasAddr = true
					continue
				}
				args = append(args, a)
			}
			if !hasAddr {
				args = append(args, "--addr", "127.0.0.1:"+port)
			}
			servers++
			fmt.Fprintf(s, "# %s:%d\nexec writ %s &%sserver%d&\nwaitready http://127.0.0.1:%s\n", filepath.Base(w.path), b.line, strings.Join(args, " "), prefix, servers, port)
			if b.servePort == "8080" {
				// The CLI's --server defaults to http://127.0.0.1:8080;
				// $WRIT_SERVER moves that default where the test's
				// server listens.
				fmt.Fprintf(s, "env WRIT_SERVER=http://127.0.0.1:%s\n", port)
			}
		case "sh":
			name := fmt.Sprintf("block%s.sh", id)
			ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(replace(b.text))})
			fmt.Fprintf(s, "# %s:%d\nexec bash -eo pipefail %s\n", filepath.Base(w.path), b.line, name)
			if b.out != nil {
				want := fmt.Sprintf("want%s.txt", id)
				ar.Files = append(ar.Files, txtar.File{Name: want, Data: []byte(replace(b.out.text))})
				fmt.Fprintf(s, "shown %s %d %s\n", w.name, i, want)
			}
		}
	}
	if servers > 0 {
		fmt.Fprintf(s, "# %s: stop its servers\nkill -INT\nwait\n", filepath.Base(w.path))
	}
}

// printed collects, under -update, what each block printed.
var printed sync.Map // "name/index" → stdout

func TestWalkthroughs(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthroughs need %s on the PATH: %v", tool, err)
		}
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "writ"), "./cmd/writ")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/writ: %v\n%s", err, out)
	}
	examples, err := filepath.Abs(filepath.Join(repoRoot, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	scripts := t.TempDir()
	byName := map[string]*walkthrough{}
	var files []string
	for _, f := range walkthroughFiles(t) {
		w, err := parseWalkthrough(f)
		if err != nil {
			t.Error(err)
			continue
		}
		runs := 0
		for _, b := range w.blocks {
			if b.kind != "skip" {
				runs++
			}
		}
		if runs == 0 {
			t.Errorf("%s has no ```sh block to run", f)
			continue
		}
		byName[w.name] = w
		p := filepath.Join(scripts, w.name+".txtar")
		if err := os.WriteFile(p, w.script(t), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	// The issue that made the tutorials stand alone found two that
	// broke when followed one after another: "One decision, start to
	// finish" after "Approvals" (a reused idempotency key answered the
	// stored allow), and "Rules over history" on the approvals server
	// (allow, allow, deny, deny). These scripts follow them in one
	// directory, in both orders.
	for name, order := range map[string][]string{
		"in-order":      {"docs_tutorials_approvals", "docs_tutorials_decision-lifecycle", "docs_tutorials_history-rules"},
		"reverse-order": {"docs_tutorials_history-rules", "docs_tutorials_decision-lifecycle", "docs_tutorials_approvals"},
	} {
		var ar txtar.Archive
		var s strings.Builder
		for i, n := range order {
			w := byName[n]
			if w == nil {
				t.Errorf("the ordering test names %s, which is no walkthrough", n)
				continue
			}
			w.translate(t, fmt.Sprintf("w%d_", i), &s, &ar)
		}
		ar.Comment = []byte(s.String())
		p := filepath.Join(scripts, "tutorials-"+name+".txtar")
		if err := os.WriteFile(p, txtar.Format(&ar), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	t.Run("run", func(t *testing.T) {
		testscript.Run(t, testscript.Params{
			Files: files,
			Setup: func(env *testscript.Env) error {
				env.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
				env.Setenv("HOME", env.WorkDir)
				return os.Symlink(examples, filepath.Join(env.WorkDir, "examples"))
			},
			Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
				"waitready": waitReady,
				"shown":     shown,
			},
			RequireExplicitExec: true,
		})
	})
	if *update {
		for name, w := range byName {
			if err := w.rewrite(name); err != nil {
				t.Error(err)
			}
		}
	}
}

// waitready URL waits for a server's /readyz to answer 200. The limit
// is there only so that a server that never starts fails the test
// instead of hanging it; it asserts nothing about speed.
func waitReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitready URL")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(args[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		for _, cmd := range ts.BackgroundCmds() {
			if cmd.ProcessState != nil {
				ts.Fatalf("the server exited before %s/readyz answered: %v", args[0], cmd.ProcessState)
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s/readyz did not answer 200 within a minute: %v", args[0], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shown NAME INDEX FILE compares the last command's stdout with the
// output block the docs show, both masked.
func shown(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: shown NAME INDEX FILE")
	}
	got := ts.ReadFile("stdout")
	want := ts.ReadFile(args[2])
	printed.Store(args[0]+"/"+args[1], got)
	if mask(got) == mask(want) {
		return
	}
	if *update {
		ts.Logf("the output shown differs; -update rewrites it")
		return
	}
	ts.Fatalf("the output the docs show differs from what the commands print (masked; run go test ./doctest -run TestWalkthroughs -update to rewrite it):\n--- shown\n%s--- printed\n%s", mask(want), mask(got))
}

// rewrite replaces each output block that differs, masked, from what
// its commands printed.
func (w *walkthrough) rewrite(name string) error {
	b, err := os.ReadFile(w.path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	changed := false
	for i := len(w.blocks) - 1; i >= 0; i-- { // from the end, so line numbers hold
		bl := w.blocks[i]
		if bl.out == nil {
			continue
		}
		v, ok := printed.Load(fmt.Sprintf("%s/%d", name, i))
		if !ok {
			continue
		}
		got := v.(string)
		if mask(got) == mask(bl.out.text) {
			continue
		}
		got = strings.TrimSuffix(got, "\n")
		lines = append(lines[:bl.out.start], append(strings.Split(got, "\n"), lines[bl.out.end:]...)...)
		changed = true
	}
	if !changed {
		return nil
	}
	return os.WriteFile(w.path, []byte(strings.Join(lines, "\n")), 0o644)
}
