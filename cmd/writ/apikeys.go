package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
)

// keys manages the API keys of tenants: create (the token is shown once),
// list and revoke. They work on the store directly, as an administrator
// on the database's host would; a running server sees a new or revoked
// key at its next request.
func (m *Main) keys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ keys create|list|revoke [flags]")
	}
	switch args[0] {
	case "create":
		return m.keysCreate(ctx, args[1:])
	case "list":
		return m.keysList(ctx, args[1:])
	case "revoke":
		return m.keysRevoke(ctx, args[1:])
	}
	return usagef("unknown keys command %q (want create, list or revoke)", args[0])
}

// openKeyStore opens the store of the data directory (or --store) as an
// API key store.
func openKeyStore(dir, url string, create bool) (auth.Store, func() error, error) {
	open := openExisting
	if create {
		open = openStore
	}
	st, err := open(dir, url)
	if err != nil {
		return nil, nil, err
	}
	ks, ok := st.(auth.Store)
	if !ok {
		st.Close()
		return nil, nil, fmt.Errorf("this store keeps no API keys")
	}
	return ks, st.Close, nil
}

func (m *Main) keysCreate(ctx context.Context, args []string) error {
	fs := m.flags("keys create", "--tenant T --subject WHO --role ROLE[,ROLE] [--data DIR | --store URL]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	tenant := fs.String("tenant", "", "the tenant the key belongs to (required)")
	subject := fs.String("subject", "", "who holds the key: a person or a service; it is the approver named in approvals (required)")
	roles := fs.String("role", "", "comma-separated roles: agent, approver, auditor, admin (required)")
	asJSON := fs.Bool("json", false, "print the key and its token as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("keys create takes no arguments, got %q", fs.Args())
	}
	if *tenant == "" || *subject == "" || *roles == "" {
		return usagef("keys create needs --tenant, --subject and --role")
	}
	var rs []writ.Role
	for r := range strings.SplitSeq(*roles, ",") {
		rs = append(rs, writ.Role(strings.TrimSpace(r)))
	}
	k, token, err := auth.NewKey(*tenant, *subject, rs, time.Now(), nil)
	if err != nil {
		return err
	}
	ks, closeStore, err := openKeyStore(*data, *storeURL, true)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := ks.PutAPIKey(ctx, k); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(struct {
			*auth.Key
			Token string `json:"token"`
		}{k, token})
	}
	fmt.Fprintf(m.Stdout, "key %s for tenant %s (%s), roles %s\n", k.ID, k.TenantID, k.Subject, joinRoles(k.Roles))
	fmt.Fprintf(m.Stdout, "token (shown once; writ keeps only its hash):\n%s\n", token)
	return nil
}

func (m *Main) keysList(ctx context.Context, args []string) error {
	fs := m.flags("keys list", "[--tenant T] [--data DIR | --store URL]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	tenant := fs.String("tenant", "", "only this tenant's keys (default: every tenant)")
	asJSON := fs.Bool("json", false, "print keys as JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	ks, closeStore, err := openKeyStore(*data, *storeURL, false)
	if err != nil {
		return err
	}
	defer closeStore()
	keys, err := ks.APIKeys(ctx, *tenant)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		for _, k := range keys {
			if err := enc.Encode(k); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTENANT\tSUBJECT\tROLES\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.TenantID, k.Subject, joinRoles(k.Roles), k.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func (m *Main) keysRevoke(ctx context.Context, args []string) error {
	fs := m.flags("keys revoke", "KEY_ID [--data DIR | --store URL]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("keys revoke needs exactly one KEY_ID")
	}
	ks, closeStore, err := openKeyStore(*data, *storeURL, false)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := ks.RevokeAPIKey(ctx, fs.Arg(0), time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "revoked %s\n", fs.Arg(0))
	return nil
}

func joinRoles(rs []writ.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}
