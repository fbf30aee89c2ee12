package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	cliFlag     = regexp.MustCompile(`^\s+--([a-z0-9-]+)`)
	cliLink     = regexp.MustCompile(`\(cli\.md#([a-z0-9_-]+)\)`)
	headingCode = regexp.MustCompile("`(writ [a-z -]+)`")
	tableFlag   = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)
)

// cliFlags reads docs/cli.md: the flags each command's section lists,
// by the section's anchor (writ-serve, writ-ledger-keys-revoke, …).
func cliFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]map[string]bool{}
	var cur map[string]bool
	inFlags := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			cur = map[string]bool{}
			sections[Slug(line[3:])] = cur
			inFlags = false
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case line == "Flags:":
			inFlags = true
		case line == "```":
			inFlags = false
		case inFlags:
			if m := cliFlag.FindStringSubmatch(line); m != nil {
				cur[m[1]] = true
			}
		}
	}
	return sections
}

// TestCommandsFlagsMatchCLI keeps the flag tables of docs/commands.md
// from drifting from docs/cli.md, which is generated from the commands'
// own flag sets. The rule:
//
//   - A flag table is a Markdown table whose first header cell is "flag";
//     every --flag in a row's first cell is a flag it names.
//   - The paragraph before the table names its command(s) by links to
//     their sections of cli.md (cli.md#writ-serve). Without such a link,
//     the commands are the `writ …` code spans of the nearest heading
//     above.
//   - Every flag a table names must be a flag of each of its commands in
//     cli.md.
//   - A table whose paragraph before starts with "Some flags of" lists only the
//     flags it has more to say about than their help. Any other flag
//     table is presented as the command's flags, and must list every
//     flag cli.md gives each of its commands.
func TestCommandsFlagsMatchCLI(t *testing.T) {
	cli := cliFlags(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "commands.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var headingCmds []string
	prev := "" // the paragraph before the table
	para := "" // the paragraph being read
	tables := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "#") {
			headingCmds = nil
			for _, m := range headingCode.FindAllStringSubmatch(line, -1) {
				headingCmds = append(headingCmds, Slug(m[1]))
			}
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if !strings.HasPrefix(line, "|") || strings.TrimSpace(cells[0]) != "flag" {
			if strings.TrimSpace(line) == "" {
				if para != "" {
					prev, para = para, ""
				}
			} else {
				para += line + "\n"
			}
			continue
		}
		if para != "" {
			prev, para = para, ""
		}
		tables++
		start := i + 1
		var cmds []string
		for _, m := range cliLink.FindAllStringSubmatch(prev, -1) {
			cmds = append(cmds, m[1])
		}
		if cmds == nil {
			cmds = headingCmds
		}
		partial := strings.HasPrefix(prev, "Some flags of")
		named := map[string]int{}
		for i++; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			first := strings.SplitN(strings.Trim(lines[i], "|"), "|", 2)[0]
			for _, m := range tableFlag.FindAllStringSubmatch(first, -1) {
				named[m[1]] = i + 1
			}
		}
		if len(cmds) == 0 {
			t.Errorf("docs/commands.md:%d: a flag table names no command (link its cli.md section on the line before)", start)
			continue
		}
		for _, cmd := range cmds {
			flags, ok := cli[cmd]
			if !ok {
				t.Errorf("docs/commands.md:%d: the flag table's command #%s has no section in docs/cli.md", start, cmd)
				continue
			}
			for _, f := range sortedKeys(named) {
				if !flags[f] {
					t.Errorf("docs/commands.md:%d: --%s is not a flag of %s in docs/cli.md", named[f], f, cmd)
				}
			}
			if partial {
				continue
			}
			var missing []string
			for f := range flags {
				if _, ok := named[f]; !ok {
					missing = append(missing, "--"+f)
				}
			}
			sort.Strings(missing)
			if missing != nil {
				t.Errorf("docs/commands.md:%d: the flag table of %s lacks %s, which docs/cli.md has (list them all, or introduce it with \"Some flags of\")", start, cmd, strings.Join(missing, ", "))
			}
		}
	}
	if tables == 0 {
		t.Fatal("no flag tables found in docs/commands.md: the parser is broken, or the test is no longer needed")
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
