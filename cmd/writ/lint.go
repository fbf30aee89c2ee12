package main

import (
	"context"
	"fmt"

	"github.com/writhq/writ/lint"
)

// lintErrors reports that lint ran and found errors (exit code 1).
type lintErrors struct{ n int }

func (e *lintErrors) Error() string {
	if e.n == 1 {
		return "lint found 1 error"
	}
	return fmt.Sprintf("lint found %d errors", e.n)
}

func (m *Main) lint(_ context.Context, args []string) error {
	fs := m.flags("lint", "[--json] PACKDIR")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of file:line: severity: [rule] message lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("lint needs exactly one PACKDIR")
	}
	r := lint.Lint(fs.Arg(0))
	var err error
	if *asJSON {
		err = m.printJSON(struct {
			*lint.Report
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
			Infos    int `json:"infos"`
		}{r, r.Count(lint.Error), r.Count(lint.Warning), r.Count(lint.Info)})
	} else {
		err = r.WriteText(m.Stdout)
	}
	if err != nil {
		return err
	}
	if n := r.Count(lint.Error); n > 0 {
		return &lintErrors{n}
	}
	return nil
}
