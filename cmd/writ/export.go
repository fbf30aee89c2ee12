package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/internal/durable"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
	"github.com/writhq/writ/witness"
)

// ledgerExport writes a ledger's export bundle: every tenant's records
// exactly as sealed, its checkpoints, the public keys with their windows
// and the pinned packs, for writ ledger verify-bundle or an independent
// verifier (docs/ledger-format.md).
func (m *Main) ledgerExport(ctx context.Context, args []string) error {
	fs := m.flags("ledger export", "--data DIR [--keys DIR] [--ledger-name N] --out FILE")
	var lf ledgerFlags
	lf.register(fs)
	out := fs.String("out", "", "the bundle file to write (required); a name ending in .gz or .tgz is gzip-compressed; - writes an uncompressed bundle to standard output")
	noCP := fs.Bool("no-checkpoint", false, "do not sign a checkpoint of each tenant's head first (the bundle then ends with the last stored checkpoint)")
	cosigned := fs.Bool("cosigned", false, "export each tenant only up to its newest checkpoint that a witness cosigned, with the witnesses' cosignatures (signs no checkpoint; a tenant no witness cosigned is left out)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return usagef("usage: writ ledger export --data DIR [--keys DIR] [--ledger-name N] --out FILE")
	}
	ring, err := keyring.Open(lf.keysDir())
	if err != nil {
		return err
	}
	keys := ring.Keys()
	if len(keys) == 0 {
		fmt.Fprintf(m.Stderr, "writ: warning: the key ring in %s holds no keys; the bundle's signatures will not verify\n", lf.keysDir())
	}
	st, err := openExisting(lf.data, lf.store)
	if err != nil {
		return err
	}
	defer st.Close()
	opts := bundle.Options{Keys: keys, LedgerName: lf.name, Cosigned: *cosigned}
	if !*noCP && !*cosigned && len(keys) > 0 {
		// A signed checkpoint of each tenant's exported head covers every
		// record of the bundle: without one, records cut off the end
		// would go unseen. It is signed by the ring whose public keys the
		// bundle carries.
		signer, err := ring.Signer(time.Now())
		if err != nil {
			return fmt.Errorf("no key of %s to sign the export's checkpoints with (--no-checkpoint exports without): %w", lf.keysDir(), err)
		}
		opts.Signer = signer
	}
	if *out == "-" {
		_, err := bundle.ExportWith(ctx, st, m.Stdout, opts)
		return err
	}
	sum, err := writeBundleFile(ctx, st, *out, opts)
	if err != nil {
		return err
	}
	cosigs := ""
	if sum.Cosignatures > 0 {
		cosigs = ", " + count(sum.Cosignatures, "witness cosignature")
	}
	fmt.Fprintf(m.Stdout, "exported %s of %s, %s%s, %s and %s to %s\n",
		count(sum.Records, "record"), count(sum.Tenants, "tenant"), count(sum.Checkpoints, "checkpoint"), cosigs, count(len(keys), "key"), count(sum.Blobs, "pinned pack blob"), *out)
	return nil
}

// writeBundleFile writes the bundle to a temporary file beside path and
// renames it into place once complete, so that path never holds half a
// bundle.
func writeBundleFile(ctx context.Context, st ledger.Store, path string, opts bundle.Options) (*bundle.Summary, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	var w io.Writer = tmp
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".tgz") {
		zw = gzip.NewWriter(tmp)
		w = zw
	}
	sum, err := bundle.ExportWith(ctx, st, w, opts)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		// The rename is durable only once the directory is synced.
		err = durable.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("write bundle %s: %w", path, err)
	}
	return sum, nil
}

// ledgerVerifyBundle verifies an export bundle offline: its records,
// chains, signatures and key windows, its checkpoints, and the record
// rules against the pinned packs it carries. Signatures are checked
// against the operator's published keys (--trusted-keys); without them
// against the bundle's own keys.json, which the command says plainly and
// answers with exit status 4 unless --trust-bundle-keys accepts that.
// With --witness, each tenant's newest checkpoint must also carry valid
// cosignatures of --min-witnesses of the given witnesses.
// Exit status 0 means intact, 3 that problems were found.
func (m *Main) ledgerVerifyBundle(ctx context.Context, args []string) error {
	const usage = "[--json] [--allow-uncovered] [--trusted-keys FILE | --trust-bundle-keys] [--evidence-issuers FILE] [--witness KEYFILE]... [--min-witnesses N] FILE"
	fs := m.flags("ledger verify-bundle", usage)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	allowUncovered := fs.Bool("allow-uncovered", false, "report records that no signed checkpoint covers as a notice, not a finding")
	trustedFile := fs.String("trusted-keys", "", "the operator's published keys (writ ledger keys publish): verify signatures against them, and keys.json too")
	trustBundle := fs.Bool("trust-bundle-keys", false, "verify against the bundle's own keys.json and exit 0 if intact (without it, and without --trusted-keys, an intact bundle exits 4)")
	issuersFile := fs.String("evidence-issuers", "", evidenceIssuersUsage)
	var witnessKeys []witness.Key
	fs.Func("witness", "a file holding a trusted witness's cosignature/v1 verifier key (repeatable); each tenant's newest checkpoint must carry valid cosignatures of --min-witnesses of them", func(path string) error {
		k, err := witness.ReadKeyFile(path)
		if err != nil {
			return err
		}
		witnessKeys = append(witnessKeys, k)
		return nil
	})
	minWitnesses := fs.Int("min-witnesses", 0, "how many of the --witness keys must have cosigned each tenant's newest checkpoint (default: all of them)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("usage: writ ledger verify-bundle %s", usage)
	}
	if *trustedFile != "" && *trustBundle {
		return usagef("--trusted-keys and --trust-bundle-keys exclude each other")
	}
	var cfg bundle.VerifyConfig
	cfg.AllowUncovered = *allowUncovered
	if *trustedFile != "" {
		data, err := os.ReadFile(*trustedFile)
		if err != nil {
			return fmt.Errorf("trusted keys: %w", err)
		}
		if cfg.Trusted, err = keyring.ParsePublished(data); err != nil {
			return fmt.Errorf("%s: %s", *trustedFile, writ.ErrorMessage(err))
		}
	}
	issuers, err := loadEvidenceIssuers(*issuersFile)
	if err != nil {
		return err
	}
	cfg.EvidenceIssuers = issuers
	switch {
	case *minWitnesses != 0 && len(witnessKeys) == 0:
		return usagef("--min-witnesses needs the witnesses' keys (--witness KEYFILE)")
	case *minWitnesses < 0 || *minWitnesses > len(witnessKeys):
		return usagef("--min-witnesses %d: give a number from 1 to the %d --witness keys", *minWitnesses, len(witnessKeys))
	case *minWitnesses == 0:
		*minWitnesses = len(witnessKeys)
	}
	b, err := bundle.OpenFile(fs.Arg(0))
	if err != nil {
		return err
	}
	defer b.Close()
	start := time.Now()
	rep, err := b.Verify(ctx, cfg)
	if err != nil {
		return err
	}
	if len(witnessKeys) > 0 {
		fs, err := witness.CheckQuorum(ctx, b, witnessKeys, *minWitnesses)
		if err != nil {
			return err
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	if err := m.printReport(rep, *asJSON, time.Since(start)); err != nil {
		return err
	}
	if !rep.Intact() {
		return &findingsError{len(rep.Findings)}
	}
	if len(witnessKeys) > 0 && !*asJSON {
		fmt.Fprintf(m.Stdout, "witnessed: each tenant's newest checkpoint carries valid cosignatures of at least %d of the %s given\n", *minWitnesses, count(len(witnessKeys), "witness key"))
	}
	if cfg.Trusted == nil && !*trustBundle {
		return &untrustedKeysError{}
	}
	return nil
}
