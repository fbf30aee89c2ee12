package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/writhq/writ"
)

// params shows and sets a tenant's parameter values on a server, as an
// admin's API key (WRIT_API_KEY): every change is a sealed record made
// by the one engine.
func (m *Main) params(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ params show|set [flags]")
	}
	switch args[0] {
	case "show":
		return m.paramsShow(ctx, args[1:])
	case "set":
		return m.paramsSet(ctx, args[1:])
	}
	return usagef("unknown params command %q (want show or set)", args[0])
}

func (m *Main) paramsShow(ctx context.Context, args []string) error {
	fs := m.flags("params show", "[--server URL] [--tenant T]")
	sf := m.addServerFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("params show takes no arguments, got %q", fs.Args())
	}
	st, err := m.client(sf).Params(ctx, *sf.tenant)
	if err != nil {
		return err
	}
	return m.printJSON(st)
}

func (m *Main) paramsSet(ctx context.Context, args []string) error {
	fs := m.flags("params set", "--reason TEXT [--reset] [--file values.json] [--server URL] [NAME=VALUE...]")
	sf := m.addServerFlags(fs)
	reason := fs.String("reason", "", "why, for the record (required)")
	by := fs.String("by", "", "who sets them (only on a development server without keys; otherwise the API key's subject)")
	reset := fs.Bool("reset", false, "start from the pack's defaults instead of the tenant's current values")
	file := fs.String("file", "", "a JSON object of values to set (NAME=VALUE arguments apply after it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("params set needs --reason")
	}
	if fs.NArg() == 0 && *file == "" && !*reset {
		return usagef("params set needs NAME=VALUE arguments, --file or --reset")
	}
	c := m.client(sf)
	cur, err := c.Params(ctx, *sf.tenant)
	if err != nil {
		return err
	}
	values := map[string]any{}
	if !*reset {
		maps.Copy(values, cur.Values)
	}
	if *file != "" {
		data, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		var fromFile map[string]any
		if err := json.Unmarshal(data, &fromFile); err != nil {
			return fmt.Errorf("%s: not a JSON object of values: %v", *file, err)
		}
		maps.Copy(values, fromFile)
	}
	for _, a := range fs.Args() {
		name, text, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return usagef("params set: %q is not NAME=VALUE", a)
		}
		values[name] = paramValue(text)
	}
	replaces := cur.Set
	if replaces == "" {
		replaces = "none"
	}
	st, err := c.SetParams(ctx, &writ.SetParamsRequest{TenantID: *sf.tenant, Values: values, By: *by, Reason: *reason, Replaces: replaces})
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(st.Effective)) {
		b, _ := json.Marshal(st.Effective[name])
		fmt.Fprintf(m.Stdout, "%s = %s\n", name, b)
	}
	fmt.Fprintf(m.Stdout, "set by %s (record %s, digest %s)\n", st.SetBy, st.Set, st.Digest)
	return nil
}

// paramValue reads VALUE of NAME=VALUE: JSON when it is JSON (a number,
// true, a quoted string, a list), else the text as a string.
func paramValue(text string) any {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err == nil {
		return v
	}
	return text
}
