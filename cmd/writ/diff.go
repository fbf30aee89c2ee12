package main

import (
	"context"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/packdiff"
)

func (m *Main) diff(_ context.Context, args []string) error {
	fs := m.flags("diff", "[--json] OLD_PACKDIR NEW_PACKDIR")
	asJSON := fs.Bool("json", false, "print the changes as JSON instead of text")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usagef("diff needs OLD_PACKDIR and NEW_PACKDIR")
	}
	old, err := pack.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	new, err := pack.Load(fs.Arg(1))
	if err != nil {
		return err
	}
	d := packdiff.Compare(old, new)
	if *asJSON {
		return m.printJSON(d)
	}
	return d.WriteText(m.Stdout)
}
