package main

import (
	"context"
	"fmt"
	"os"
	"regexp"

	"github.com/writhq/writ/packtest"
)

// testFailures reports that the tests ran and some failed, or coverage
// fell below --min-coverage (exit code 1).
type testFailures struct{ msg string }

func (e *testFailures) Error() string { return e.msg }

func (m *Main) test(ctx context.Context, args []string) error {
	fs := m.flags("test", "[--json] [--junit FILE] [--min-coverage PCT] [--run REGEXP] [-v] PACKDIR")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of text")
	junit := fs.String("junit", "", "also write a JUnit XML report to FILE")
	minCov := fs.Float64("min-coverage", 0, "fail when coverage is below PCT percent (0-100)")
	runPat := fs.String("run", "", "run only the cases whose name matches REGEXP")
	verbose := fs.Bool("v", false, "list passing cases too")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("test needs exactly one PACKDIR")
	}
	if *minCov < 0 || *minCov > 100 {
		return usagef("--min-coverage %v is not a percentage (0-100)", *minCov)
	}
	var opts packtest.Options
	if *runPat != "" {
		re, err := regexp.Compile(*runPat)
		if err != nil {
			return usagef("bad --run %q: %v", *runPat, err)
		}
		opts.Run = re
	}
	suite, err := packtest.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	rep, err := suite.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		err = m.printJSON(rep)
	} else {
		err = rep.WriteText(m.Stdout, *verbose)
	}
	if err != nil {
		return err
	}
	if *junit != "" {
		f, err := os.Create(*junit)
		if err != nil {
			return err
		}
		werr := rep.WriteJUnit(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write %s: %w", *junit, werr)
		}
	}
	switch {
	case len(rep.Cases) == 0:
		return &testFailures{fmt.Sprintf("no test cases in %s (want tests/*.yaml)", fs.Arg(0))}
	case rep.Failed > 0:
		return &testFailures{fmt.Sprintf("%d of %d cases failed", rep.Failed, len(rep.Cases))}
	case rep.Coverage.Percent < *minCov:
		return &testFailures{fmt.Sprintf("coverage %.1f%% is below --min-coverage %v%%", rep.Coverage.Percent, *minCov)}
	}
	return nil
}
