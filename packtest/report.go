package packtest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Report is the result of running a pack's tests.
type Report struct {
	Pack     string        `json:"pack"`
	PackHash string        `json:"pack_hash"`
	Dir      string        `json:"dir"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Cases    []*CaseResult `json:"cases"`
	Coverage *Coverage     `json:"coverage"`
}

// CaseResult is one case's result.
type CaseResult struct {
	Name     string    `json:"name"`
	File     string    `json:"file"`
	Line     int       `json:"line"`
	Kind     string    `json:"kind"` // check or run
	Passed   bool      `json:"passed"`
	Failures []Failure `json:"failures,omitempty"`
}

// Failure is one expected field that did not match: where the case
// states it, what it wants and what writ answered.
type Failure struct {
	Field string `json:"field"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	Want  any    `json:"want"`
	Got   any    `json:"got"`
	// Missing and Unexpected spell out a list's difference: what the case
	// wants that writ did not answer, and what writ answered that the
	// case does not want.
	Missing    []string `json:"missing,omitempty"`
	Unexpected []string `json:"unexpected,omitempty"`
}

// show renders a value for people: JSON, so a string and a list look
// like what the case wrote.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// WriteText writes the report for people: each failing case with the
// fields it got wrong (want and got, with file:line), passing cases too
// when verbose, then the coverage and the totals.
func (r *Report) WriteText(w io.Writer, verbose bool) error {
	var b strings.Builder
	for _, c := range r.Cases {
		if c.Passed {
			if verbose {
				fmt.Fprintf(&b, "PASS %s:%d: %s\n", c.File, c.Line, c.Name)
			}
			continue
		}
		fmt.Fprintf(&b, "FAIL %s:%d: %s\n", c.File, c.Line, c.Name)
		for _, f := range c.Failures {
			fmt.Fprintf(&b, "    %s:%d: %s\n        want: %s\n        got:  %s\n", f.File, f.Line, f.Field, show(f.Want), show(f.Got))
			if len(f.Missing) > 0 {
				fmt.Fprintf(&b, "        missing:    %s\n", show(f.Missing))
			}
			if len(f.Unexpected) > 0 {
				fmt.Fprintf(&b, "        unexpected: %s\n", show(f.Unexpected))
			}
		}
	}
	if cov := r.Coverage; cov != nil {
		fmt.Fprintf(&b, "coverage: %.1f%% of rules, controls, gates, redaction rules, evidence requirements, budgets, verification checks and steps (%d of %d)\n", cov.Percent, cov.Covered, cov.Total)
		for _, it := range cov.Uncovered() {
			fmt.Fprintf(&b, "    not covered: %s:%d: %s: %s\n", it.File, it.Line, describeItem(it), why(it))
		}
	}
	verdict := "ok"
	if r.Failed > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s %s (%s): %d %s, %d passed, %d failed\n", verdict, r.Pack, r.Dir, len(r.Cases), plural1(len(r.Cases), "case", "cases"), r.Passed, r.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}

func plural1(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JUnit XML, as CI systems read it: one testsuite per test file.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes the report as JUnit XML: a testsuite per test file,
// a testcase per case, and a failure listing the fields it got wrong.
func (r *Report) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "writ test " + r.Pack, Tests: len(r.Cases), Failures: r.Failed}
	suites := map[string]int{}
	for _, c := range r.Cases {
		i, ok := suites[c.File]
		if !ok {
			i = len(out.Suites)
			suites[c.File] = i
			out.Suites = append(out.Suites, junitSuite{Name: c.File})
		}
		s := &out.Suites[i]
		jc := junitCase{Name: c.Name, Classname: r.Pack, File: c.File, Line: c.Line}
		if !c.Passed {
			var text strings.Builder
			fields := make([]string, 0, len(c.Failures))
			for _, f := range c.Failures {
				fields = append(fields, f.Field)
				fmt.Fprintf(&text, "%s:%d: %s\n    want: %s\n    got:  %s\n", f.File, f.Line, f.Field, show(f.Want), show(f.Got))
				if len(f.Missing) > 0 {
					fmt.Fprintf(&text, "    missing:    %s\n", show(f.Missing))
				}
				if len(f.Unexpected) > 0 {
					fmt.Fprintf(&text, "    unexpected: %s\n", show(f.Unexpected))
				}
			}
			jc.Failure = &junitFailure{Type: "mismatch", Message: "wrong " + strings.Join(fields, ", "), Text: text.String()}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
