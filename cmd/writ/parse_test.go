package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

// TestParseFlagsAnywhere: flags may come before or after a command's
// arguments, "--" ends them, and the flag package's own rules (a value in
// the next word, -name=value, booleans, "-" as an argument, errors) hold.
func TestParseFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
		json   bool
		rest   []string
		err    string // "usage", "help" or ""
	}{
		{name: "flags first", args: []string{"--reason", "ok", "apr_1"}, reason: "ok", rest: []string{"apr_1"}},
		{name: "flags after", args: []string{"apr_1", "--reason", "ok"}, reason: "ok", rest: []string{"apr_1"}},
		{name: "one dash", args: []string{"apr_1", "-reason", "ok"}, reason: "ok", rest: []string{"apr_1"}},
		{name: "between", args: []string{"a", "--json", "b", "--reason=x y", "c"}, reason: "x y", json: true, rest: []string{"a", "b", "c"}},
		{name: "a value like a flag", args: []string{"--reason", "--json", "a"}, reason: "--json", rest: []string{"a"}},
		{name: "a boolean takes no word", args: []string{"--json", "a"}, json: true, rest: []string{"a"}},
		{name: "a boolean set false", args: []string{"a", "--json=false"}, rest: []string{"a"}},
		{name: "double dash ends flags", args: []string{"a", "--", "--reason", "x"}, rest: []string{"a", "--reason", "x"}},
		{name: "a lone dash is an argument", args: []string{"-", "--json"}, json: true, rest: []string{"-"}},
		{name: "no arguments", args: nil, rest: []string{}},
		{name: "unknown flag after an argument", args: []string{"a", "--nope"}, err: "usage"},
		{name: "unknown flag with a value", args: []string{"a", "--nope", "v"}, err: "usage"},
		{name: "a value missing", args: []string{"a", "--reason"}, err: "usage"},
		{name: "three dashes", args: []string{"---reason", "x"}, err: "usage"},
		{name: "help after an argument", args: []string{"a", "-h"}, err: "help"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			reason := fs.String("reason", "", "")
			asJSON := fs.Bool("json", false, "")
			err := parse(fs, tc.args)
			var ue *usageError
			switch tc.err {
			case "usage":
				if !errors.As(err, &ue) {
					t.Fatalf("parse(%q) = %v, want a usage error", tc.args, err)
				}
				return
			case "help":
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("parse(%q) = %v, want flag.ErrHelp", tc.args, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tc.args, err)
			}
			if *reason != tc.reason || *asJSON != tc.json || !slices.Equal(fs.Args(), tc.rest) {
				t.Errorf("parse(%q): reason %q json %v args %q, want %q %v %q", tc.args, *reason, *asJSON, fs.Args(), tc.reason, tc.json, tc.rest)
			}
		})
	}
}
