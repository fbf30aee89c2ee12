package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/writhq/writ/ledger"
)

func (m *Main) ledger(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return usagef("usage: writ ledger verify --data DIR [--json]")
	}
	fs := m.flags("ledger verify", "--data DIR [--json]")
	data := fs.String("data", defaultDataDir, "data directory")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if _, err := os.Stat(*data); err != nil {
		return fmt.Errorf("no ledger at %s: %w", *data, err)
	}
	st, err := openStore(*data)
	if err != nil {
		return err
	}
	defer st.Close()
	findings, n, err := ledger.VerifyChains(ctx, st)
	if err != nil {
		return err
	}
	if *asJSON {
		if findings == nil {
			findings = []ledger.ChainFinding{}
		}
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"records": n, "intact": len(findings) == 0, "findings": findings}); err != nil {
			return err
		}
	} else {
		for _, f := range findings {
			fmt.Fprintf(m.Stdout, "%s\ttenant %s seq %d record %s: %s\n", f.Kind, f.TenantID, f.Seq, f.RecordID, f.Detail)
		}
		if len(findings) == 0 {
			fmt.Fprintf(m.Stdout, "ledger intact: %d records, every hash and chain link verified\n", n)
		}
	}
	if len(findings) > 0 {
		return &findingsError{len(findings)}
	}
	return nil
}
