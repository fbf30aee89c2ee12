package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/delegation"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pinned"
)

func (m *Main) ledger(ctx context.Context, args []string) error {
	usage := usagef("usage: writ ledger verify|checkpoint|prove|consistency|export|verify-bundle|generate|keys [flags]")
	if len(args) == 0 {
		return usage
	}
	switch args[0] {
	case "verify":
		return m.ledgerVerify(ctx, args[1:])
	case "checkpoint":
		return m.ledgerCheckpoint(ctx, args[1:])
	case "prove":
		return m.ledgerProve(ctx, args[1:])
	case "consistency":
		return m.ledgerConsistency(ctx, args[1:])
	case "keys":
		return m.ledgerKeys(ctx, args[1:])
	case "export":
		return m.ledgerExport(ctx, args[1:])
	case "verify-bundle":
		return m.ledgerVerifyBundle(ctx, args[1:])
	case "generate":
		return m.generate(ctx, args[1:])
	}
	return usage
}

// ledgerFlags are the flags every ledger command shares.
type ledgerFlags struct {
	data, store, keys, name string
}

func (lf *ledgerFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&lf.data, "data", defaultDataDir, "data directory")
	fs.StringVar(&lf.store, "store", "", storeUsage)
	fs.StringVar(&lf.keys, "keys", "", "signing key ring directory (default DATA/keys)")
	fs.StringVar(&lf.name, "ledger-name", "writ", "ledger name, the first part of checkpoint origins")
}

func (lf *ledgerFlags) keysDir() string {
	if lf.keys != "" {
		return lf.keys
	}
	return defaultKeysDir(lf.data)
}

func (m *Main) ledgerVerify(ctx context.Context, args []string) error {
	fs := m.flags("ledger verify", "[--data DIR] [--keys DIR] [--json]")
	var lf ledgerFlags
	lf.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	hashOnly := fs.Bool("hash-only", false, "check only hashes, the chain, the tree and checkpoint roots (no signatures, rules or stored companions)")
	requireCP := fs.Bool("require-checkpoint", false, "report records that no signed checkpoint covers as a finding (exit 3), not a notice")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the verification to this file")
	issuersFile := fs.String("evidence-issuers", "", evidenceIssuersUsage)
	if err := parse(fs, args); err != nil {
		return err
	}
	issuers, err := loadEvidenceIssuers(*issuersFile)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	st, err := openExisting(lf.data, lf.store)
	if err != nil {
		return err
	}
	defer st.Close()
	// Every capability a full verification reads is declared by
	// verify.Store: a store without one is refused, never verified in
	// part.
	vs, ok := st.(verify.Store)
	if !ok {
		return fmt.Errorf("the store (%T) cannot be verified: it does not keep all a ledger keeps", st)
	}
	opts := verify.StoreOptions{LedgerName: lf.name, RequireCheckpoints: *requireCP, HashOnly: *hashOnly}
	if !*hashOnly {
		ring, err := m.verifyingKeys(lf.keysDir())
		if err != nil {
			return err
		}
		opts.Ring = ring
		opts.Rules = verify.NewRules(pinned.NewPacks(st))
		opts.EvidenceIssuers = issuers
	}
	start := time.Now()
	opts.Now = start
	rep, err := verify.VerifyStore(ctx, vs, opts)
	if err != nil {
		return err
	}
	if err := m.printReport(rep, *asJSON, time.Since(start)); err != nil {
		return err
	}
	if !rep.Intact() {
		return &findingsError{len(rep.Findings)}
	}
	return nil
}

const evidenceIssuersUsage = "the issuers of signed evidence items the auditor trusts, per tenant, in the format of writ serve --evidence-issuers: verify each signed item's JWS with their keys (without it, signatures are not checked, with a notice; docs/ledger-format.md §2.10)"

// loadEvidenceIssuers reads an evidence issuers file for verification;
// "" is none (a nil verify.EvidenceSignatures, not a typed nil).
func loadEvidenceIssuers(path string) (verify.EvidenceSignatures, error) {
	if path == "" {
		return nil, nil
	}
	is, err := delegation.LoadEvidenceIssuers(path)
	if err != nil {
		return nil, err
	}
	return is, nil
}

// verifyingKeys opens the key ring in dir to verify a ledger with. An
// empty ring falls back to $WRIT_SIGNING_KEY: a ledger signed with the
// environment's key verifies with it.
func (m *Main) verifyingKeys(dir string) (*keyring.Ring, error) {
	ring, err := keyring.Open(dir)
	if err != nil {
		return nil, err
	}
	if skey := m.Getenv("WRIT_SIGNING_KEY"); skey != "" && len(ring.Keys()) == 0 {
		if ring, err = keyring.FromEnv(skey, time.Unix(0, 0)); err != nil {
			return nil, fmt.Errorf("WRIT_SIGNING_KEY: %w", err)
		}
	}
	return ring, nil
}

func (m *Main) printReport(rep *verify.Report, asJSON bool, took time.Duration) error {
	if asJSON {
		return m.printJSON(struct {
			Intact bool `json:"intact"`
			*verify.Report
		}{rep.Intact(), rep})
	}
	for _, f := range rep.Findings {
		where := fmt.Sprintf("tenant %s", f.TenantID)
		if f.Seq > 0 {
			where += fmt.Sprintf(" seq %d", f.Seq)
		}
		if f.RecordID != "" {
			where += " record " + f.RecordID
		}
		if f.TreeSize > 0 {
			where += fmt.Sprintf(" checkpoint %d", f.TreeSize)
		}
		if f.KeyID != "" {
			where += " API key " + f.KeyID
		}
		if f.SigningKeyID != "" {
			where = "signing key " + f.SigningKeyID
			if f.TenantID != "" {
				where = fmt.Sprintf("tenant %s %s", f.TenantID, where)
			}
		}
		fmt.Fprintf(m.Stdout, "%s\t%s: %s\n", f.Kind, where, f.Detail)
	}
	for _, f := range rep.Notices {
		fmt.Fprintf(m.Stdout, "notice: %s\ttenant %s: %s\n", f.Kind, f.TenantID, f.Detail)
	}
	if rep.Intact() {
		with := ""
		switch rep.KeySource {
		case bundle.KeysTrusted:
			with = " against the trusted keys"
		case bundle.KeysFromBundle:
			with = " against the bundle's own keys (keys.json), not against trusted keys"
		}
		fmt.Fprintf(m.Stdout, "ledger intact%s: %s of %s and %s verified in %s\n", with, count(rep.Records, "record"), count(rep.Tenants, "tenant"), count(rep.Checkpoints, "checkpoint"), took.Round(time.Millisecond))
	}
	return nil
}

// offlineEngine opens the store and the signing keys of a data directory
// for the ledger commands that sign or prove without a server. A command
// that signs (needKeys: it stores a checkpoint) is a writer, so it takes
// the data directory's writer lock, as every command that appends does;
// one that only proves reads beside a running writer.
func (m *Main) offlineEngine(ctx context.Context, lf ledgerFlags, needKeys bool) (*engine.Engine, func(), error) {
	open := openExisting
	if needKeys {
		open = openExistingWriter
	}
	st, err := open(lf.data, lf.store)
	if err != nil {
		return nil, nil, err
	}
	cfg := engine.Config{Store: st, LedgerName: lf.name}
	if needKeys {
		log, _ := m.logger("warn")
		keys, _, err := m.openSigningKeys(lf.keysDir(), time.Now(), log)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		cfg.Keys = keys
	}
	eng, err := engine.New(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return eng, func() { eng.Close(); st.Close() }, nil
}

func (m *Main) ledgerCheckpoint(ctx context.Context, args []string) error {
	fs := m.flags("ledger checkpoint", "--tenant T [--issue] [--size N]")
	var lf ledgerFlags
	lf.register(fs)
	tenant := fs.String("tenant", "", "tenant (required)")
	issue := fs.Bool("issue", false, "sign a checkpoint of the current tree now")
	size := fs.Int64("size", 0, "the checkpoint of this tree size (default the latest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return usagef("ledger checkpoint needs --tenant")
	}
	eng, done, err := m.offlineEngine(ctx, lf, *issue)
	if err != nil {
		return err
	}
	defer done()
	var cp *writ.Checkpoint
	if *issue {
		cp, err = eng.IssueCheckpoint(ctx, *tenant)
	} else {
		cp, err = eng.Checkpoint(ctx, *tenant, *size)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(m.Stdout, cp.Note)
	return err
}

func (m *Main) ledgerProve(ctx context.Context, args []string) error {
	fs := m.flags("ledger prove", "--tenant T [--size N] RECORD_ID")
	var lf ledgerFlags
	lf.register(fs)
	tenant := fs.String("tenant", "", "tenant (required)")
	size := fs.Int64("size", 0, "prove against the checkpoint of this tree size (default the latest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 1 {
		return usagef("usage: writ ledger prove --tenant T [--size N] RECORD_ID")
	}
	eng, done, err := m.offlineEngine(ctx, lf, false)
	if err != nil {
		return err
	}
	defer done()
	p, err := eng.InclusionProof(ctx, *tenant, fs.Arg(0), *size)
	if err != nil {
		return err
	}
	return m.printJSON(p)
}

func (m *Main) ledgerConsistency(ctx context.Context, args []string) error {
	fs := m.flags("ledger consistency", "--tenant T --from N [--to M]")
	var lf ledgerFlags
	lf.register(fs)
	tenant := fs.String("tenant", "", "tenant (required)")
	from := fs.String("from", "", "the older checkpoint's tree size (required)")
	to := fs.Int64("to", 0, "the newer checkpoint's tree size (default the latest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	old, err := strconv.ParseInt(*from, 10, 64)
	if *tenant == "" || err != nil {
		return usagef("usage: writ ledger consistency --tenant T --from N [--to M]")
	}
	eng, done, err := m.offlineEngine(ctx, lf, false)
	if err != nil {
		return err
	}
	defer done()
	p, err := eng.ConsistencyProof(ctx, *tenant, old, *to)
	if err != nil {
		return err
	}
	return m.printJSON(p)
}
