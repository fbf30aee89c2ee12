package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module root, two levels up from nothing: this package
// sits directly under it.
const repoRoot = ".."

// markdownFiles lists README.md and every Markdown file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional "title". Nested brackets in the text are rare in our docs
	// and not needed.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [label]: target.
	refDef = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// htmlAnchor matches an explicit anchor: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// inlineCode matches a code span, whose text is never a link.
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// parsed is what the link check needs of one Markdown file.
type parsed struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	target string
	line   int
}

// parse reads a Markdown file's headings (as GitHub's anchors) and its
// links, skipping fenced code blocks and code spans.
func parse(text string) parsed {
	p := parsed{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, string(fence[0])) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for _, r := range trimmed[3:] {
				if r != rune(fence[0]) {
					break
				}
				fence += string(r)
			}
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil && len(line)-len(trimmed) < 4 {
			slug := Slug(m[2])
			n := seen[slug]
			seen[slug] = n + 1
			if n > 0 {
				p.anchors[slug+"-"+itoa(n)] = true
			} else {
				p.anchors[slug] = true
			}
		}
		code := inlineCode.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(code, -1) {
			p.links = append(p.links, link{m[1], i + 1})
		}
		for _, m := range refDef.FindAllStringSubmatch(code, -1) {
			p.links = append(p.links, link{m[1], i + 1})
		}
	}
	return p
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

var (
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text: the rendered text, in
// lower case, with every character that is not a letter, a digit, a
// space, a hyphen or an underscore removed, and each space made a
// hyphen. (A repeated heading gets -1, -2, … appended; parse does that.)
func Slug(h string) string {
	h = mdLinkText.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestSlug pins the anchor rules against headings our docs use.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Verification contracts: a walkthrough", "verification-contracts-a-walkthrough"},
		{"`writ ledger verify`", "writ-ledger-verify"},
		{"`writ run start`, `writ run attempt` and `writ run show`", "writ-run-start-writ-run-attempt-and-writ-run-show"},
		{"2.7 Bound companions", "27-bound-companions"},
		{"Quick start", "quick-start"},
		{"Next to [OPA](https://example.org)", "next-to-opa"},
		{"What's *new* — v2", "whats-new--v2"},
		{"snake_case_name", "snake_case_name"},
	} {
		if got := Slug(c.in); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	p := parse("# A\n## A\n```\n# not a heading\n```\n### A\n")
	for _, a := range []string{"a", "a-1", "a-2"} {
		if !p.anchors[a] {
			t.Errorf("anchor %q missing from %v", a, p.anchors)
		}
	}
	if p.anchors["not-a-heading"] {
		t.Error("a heading inside a code block made an anchor")
	}
}

// TestLinks checks that every relative link in README.md and docs/
// names a file or directory that exists, and that every #anchor names a
// heading (or an explicit <a id>) of the Markdown file it points into.
func TestLinks(t *testing.T) {
	files := markdownFiles(t)
	cache := map[string]parsed{}
	load := func(path string) (parsed, error) {
		if p, ok := cache[path]; ok {
			return p, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return parsed{}, err
		}
		p := parse(string(b))
		cache[path] = p
		return p, nil
	}
	checked := 0
	for _, file := range files {
		p, err := load(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, file)
		for _, l := range p.links {
			target := l.target
			if i := strings.IndexAny(target, ":"); i > 0 && !strings.ContainsAny(target[:i], "/#.") {
				continue // a URL with a scheme: http, https, mailto
			}
			if strings.HasPrefix(target, "//") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					t.Errorf("%s:%d: link %q is absolute; use a relative path", rel, l.line, target)
					continue
				}
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, l.line, target, dest)
					continue
				}
			}
			checked++
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				continue // anchors into source files are line numbers on GitHub
			}
			dp, err := load(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, l.line, target, err)
				continue
			}
			if !dp.anchors[strings.ToLower(frag)] && !dp.anchors[frag] {
				t.Errorf("%s:%d: link %q: no heading in %s has the anchor #%s", rel, l.line, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the Markdown parser is broken")
	}
}
