package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// evidence submits, shows and revokes items of a tenant's evidence store
// on a server: as an issuer's API key (WRIT_API_KEY with the issuer role),
// or carrying an item an issuer signed (--jws, any key of the tenant).
func (m *Main) evidence(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ evidence submit|show|revoke [flags]")
	}
	switch args[0] {
	case "submit":
		return m.evidenceSubmit(ctx, args[1:])
	case "show":
		return m.evidenceShow(ctx, args[1:])
	case "revoke":
		return m.evidenceRevoke(ctx, args[1:])
	}
	return usagef("unknown evidence command %q (want submit, show or revoke)", args[0])
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func (m *Main) evidenceSubmit(ctx context.Context, args []string) error {
	fs := m.flags("evidence submit", "--kind K [--id ID] [--subject S]... [--attr NAME=VALUE]... [--observed-at T] [--expires-at T] [--server URL | --data DIR --pack DIR] | --jws FILE")
	sf := m.addServerFlags(fs)
	data := fs.String("data", "", "store the item in the local ledger in DIR instead of on a server, as writ check --data decides there (needs --pack, --tenant and --issuer)")
	packDir := fs.String("pack", "", "with --data: the pack whose redaction rules the item is stored under")
	storeURL := fs.String("store", "", "with --data: "+storeUsage)
	nowFlag := fs.String("now", "", "with --data: store as of this time (RFC 3339) instead of the clock, as writ check --now decides")
	kind := fs.String("kind", "", "the item's kind, e.g. identity_verification (required unless --jws)")
	id := fs.String("id", "", "the item's id (default: writ assigns ev_…)")
	var subjects, attrs stringList
	fs.Var(&subjects, "subject", "a subject id the item is about, e.g. customer:cus_77 (repeatable)")
	fs.Var(&attrs, "attr", "an attribute NAME=VALUE, VALUE read as JSON when it is JSON (repeatable)")
	observed := fs.String("observed-at", "", "when the fact was observed, RFC 3339 (default: now)")
	expires := fs.String("expires-at", "", "when the item stops supporting decisions, RFC 3339 (default: never)")
	issuer := fs.String("issuer", "", "the issuer's name (only on a development server without keys; otherwise the API key's subject)")
	jwsFile := fs.String("jws", "", "a file holding a compact JWS an issuer signed over the item (then no item flags); - reads standard input")
	asJSON := fs.Bool("json", false, "print the stored item as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("evidence submit takes no arguments, got %q", fs.Args())
	}
	clock := time.Now
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return usagef("bad --now %q: want RFC 3339, like 2026-05-09T09:31:42Z", *nowFlag)
		}
		clock = func() time.Time { return t }
	}
	req := &writ.AddEvidenceRequest{TenantID: *sf.tenant, Kind: *kind, ID: *id, Issuer: *issuer}
	if *jwsFile != "" {
		if *kind != "" || *id != "" || len(subjects) > 0 || len(attrs) > 0 || *observed != "" || *expires != "" || *issuer != "" {
			return usagef("evidence submit --jws takes no item flags: the item is the JWS's payload")
		}
		var data []byte
		var err error
		if *jwsFile == "-" {
			data, err = io.ReadAll(m.Stdin)
		} else {
			data, err = os.ReadFile(*jwsFile)
		}
		if err != nil {
			return err
		}
		req.JWS = strings.TrimSpace(string(data))
	} else {
		if *kind == "" {
			return usagef("evidence submit needs --kind (or --jws)")
		}
		req.SubjectIDs = subjects
		if len(attrs) > 0 {
			req.Attributes = map[string]any{}
			for _, a := range attrs {
				name, text, ok := strings.Cut(a, "=")
				if !ok || name == "" {
					return usagef("evidence submit: --attr %q is not NAME=VALUE", a)
				}
				req.Attributes[name] = paramValue(text)
			}
		}
		at := clock().UTC()
		if *observed != "" {
			t, err := time.Parse(time.RFC3339Nano, *observed)
			if err != nil {
				return usagef("evidence submit: --observed-at %q is not an RFC 3339 time", *observed)
			}
			at = t
		}
		req.ObservedAt = &at
		if *expires != "" {
			t, err := time.Parse(time.RFC3339Nano, *expires)
			if err != nil {
				return usagef("evidence submit: --expires-at %q is not an RFC 3339 time", *expires)
			}
			req.ExpiresAt = &t
		}
	}
	var svc writ.EvidenceService = m.client(sf)
	if *data != "" {
		if *packDir == "" {
			return usagef("evidence submit --data needs --pack DIR")
		}
		eng, done, err := m.localEngine(ctx, *packDir, *data, *storeURL, clock)
		if err != nil {
			return err
		}
		defer done()
		svc = eng
	} else if *packDir != "" || *storeURL != "" || *nowFlag != "" {
		return usagef("evidence submit: --pack, --store and --now go with --data")
	}
	se, err := svc.AddEvidence(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(se)
	}
	fmt.Fprintf(m.Stdout, "%s %s stored, %s by %s (content address %s, record %s)\n", se.Item.Kind, se.Item.ID, se.Provenance, se.Item.Issuer, se.ContentAddress, se.RecordID)
	return nil
}

func (m *Main) evidenceShow(ctx context.Context, args []string) error {
	fs := m.flags("evidence show", "[--server URL] [--tenant T] ID|sha256:…")
	sf := m.addServerFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("evidence show takes one item id or content address")
	}
	se, err := m.client(sf).Evidence(ctx, *sf.tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	return m.printJSON(se)
}

func (m *Main) evidenceRevoke(ctx context.Context, args []string) error {
	fs := m.flags("evidence revoke", "--reason TEXT [--server URL] [--tenant T] ID")
	sf := m.addServerFlags(fs)
	reason := fs.String("reason", "", "why, for the record (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("evidence revoke takes one item id")
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("evidence revoke needs --reason")
	}
	se, err := m.client(sf).RevokeEvidence(ctx, &writ.RevokeEvidenceRequest{TenantID: *sf.tenant, ID: fs.Arg(0), Reason: *reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "%s %s revoked by %s (record %s)\n", se.Item.Kind, se.Item.ID, se.Revoked.By, se.Revoked.RecordID)
	return nil
}
