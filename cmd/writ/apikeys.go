package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/auth"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger"
)

// keys manages the API keys of tenants: create (the token is shown once),
// list, revoke, and sign (keys created before writ signed them). They work
// on the store directly, as an administrator on the database's host
// would; a running server sees a new or revoked key at its next request.
// Create and sign sign with the ledger's signing key ring, so they need
// it (DATA/keys, --keys or WRIT_SIGNING_KEY) as the server does.
func (m *Main) keys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("usage: writ keys create|list|revoke|sign [flags]")
	}
	switch args[0] {
	case "create":
		return m.keysCreate(ctx, args[1:])
	case "list":
		return m.keysList(ctx, args[1:])
	case "revoke":
		return m.keysRevoke(ctx, args[1:])
	case "sign":
		return m.keysSign(ctx, args[1:])
	}
	return usagef("unknown keys command %q (want create, list, revoke or sign)", args[0])
}

// keySigner returns the signer of the ring in dir (or WRIT_SIGNING_KEY)
// at now. With the embedded store (storeURL empty) it generates the ring's
// first key if it has none, as the server's first start over that data
// directory would; with a shared store an empty ring is an error, since a
// key of its own would sign API keys no server accepts.
func (m *Main) keySigner(dir, storeURL string, now time.Time) (ledger.Signer, error) {
	if storeURL != "" && m.Getenv("WRIT_SIGNING_KEY") == "" {
		r, err := keyring.Open(dir)
		if err != nil {
			return nil, err
		}
		if len(r.Keys()) == 0 {
			return nil, fmt.Errorf("no signing key in %s: API keys are signed with the key ring of the servers that share the store; give it with --keys DIR (or --data DIR holding keys/), or set WRIT_SIGNING_KEY", dir)
		}
	}
	log, _ := m.logger("warn")
	keys, _, err := m.openSigningKeys(dir, now, log)
	if err != nil {
		return nil, err
	}
	return keys(now)
}

// keyRing returns the public side of the ring in dir (or
// WRIT_SIGNING_KEY) to verify keys' signatures with.
func (m *Main) keyRing(dir string) (ringView, error) {
	if skey := m.Getenv("WRIT_SIGNING_KEY"); skey != "" {
		r, err := keyring.FromEnv(skey, time.Unix(0, 0))
		if err != nil {
			return nil, fmt.Errorf("WRIT_SIGNING_KEY: %w", err)
		}
		return r, nil
	}
	return keyring.Open(dir)
}

// openKeyStore opens the store of the data directory (or --store) as an
// API key store.
func openKeyStore(dir, url string, create bool) (auth.Store, func() error, error) {
	open := openExisting
	if create {
		open = openShared // keys append nothing to the chain
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
	fs := m.flags("keys create", "--tenant T --subject WHO --role ROLE[,ROLE] [--actor-type TYPE] [--acts-for TYPE:ID[,TYPE:ID]] [--expires D|TIME] [--data DIR] [--store URL] [--keys DIR]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	keysDir := fs.String("keys", "", "signing key ring directory that signs the key (default DATA/keys); WRIT_SIGNING_KEY overrides it")
	tenant := fs.String("tenant", "", "the tenant the key belongs to (required)")
	subject := fs.String("subject", "", "who holds the key: a person or a service; it is the approver named in approvals (required)")
	roles := fs.String("role", "", "comma-separated roles: agent, approver, auditor, admin, meter (a key whose usage figures are issued; with agent to check), issuer (submits and revokes evidence items), gateway (the MCP gateway's own key for writ gateway --server: the evidence it captures from tool results is observed) (required)")
	expires := fs.String("expires", "", "when the key stops opening anything: a duration from now (2160h) or an RFC 3339 time (2027-03-01T00:00:00Z); its signature covers it (default: the key does not expire)")
	actorType := fs.String("actor-type", "AGENT", "the actor type the key acts as: AGENT, HUMAN or SERVICE; with --subject it is the actor of every check the key makes (docs/trust.md)")
	actsFor := fs.String("acts-for", "", "comma-separated principals the key may also act for, as TYPE:ID patterns ('*' matches any run of characters, TYPE may be *): an orchestrator's SERVICE key acting for its agents, say AGENT:agt_* (default: none)")
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
	now := time.Now()
	k, token, err := auth.NewKey(*tenant, *subject, rs, now, nil)
	if err != nil {
		return err
	}
	var patterns []string
	for p := range strings.SplitSeq(*actsFor, ",") {
		if p = strings.TrimSpace(p); p != "" {
			patterns = append(patterns, p)
		}
	}
	if err := k.SetActor(*actorType, patterns); err != nil {
		return usagef("%v", err)
	}
	if *expires != "" {
		at, err := expiryTime(*expires, now)
		if err != nil {
			return usagef("%v", err)
		}
		k.ExpiresAt = &at
	}
	if *keysDir == "" {
		*keysDir = defaultKeysDir(*data)
	}
	signer, err := m.keySigner(*keysDir, *storeURL, now)
	if err != nil {
		return err
	}
	if err := auth.Sign(k, signer, now); err != nil {
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
	fmt.Fprintf(m.Stdout, "acts as %s:%s", keyActorType(k), k.Subject)
	if len(k.ActsFor) > 0 {
		fmt.Fprintf(m.Stdout, ", and for %s", strings.Join(k.ActsFor, ", "))
	}
	fmt.Fprintln(m.Stdout)
	if k.ExpiresAt != nil {
		fmt.Fprintf(m.Stdout, "expires %s\n", k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(m.Stdout, "token (shown once; writ keeps only its hash):\n%s\n", token)
	return nil
}

func (m *Main) keysList(ctx context.Context, args []string) error {
	fs := m.flags("keys list", "[--tenant T] [--data DIR] [--store URL] [--keys DIR]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	keysDir := fs.String("keys", "", "signing key ring directory to check the keys' signatures with (default DATA/keys); WRIT_SIGNING_KEY overrides it")
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
	if *keysDir == "" {
		*keysDir = defaultKeysDir(*data)
	}
	ring, err := m.keyRing(*keysDir)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		for _, k := range keys {
			if err := enc.Encode(struct {
				*auth.Key
				Signature string `json:"signature"`
			}{k, signatureStatus(k, ring)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTENANT\tSUBJECT\tROLES\tCREATED\tEXPIRES\tREVOKED\tSIGNATURE")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.TenantID, k.Subject, joinRoles(k.Roles), k.CreatedAt.UTC().Format(time.RFC3339),
			timeOrDash(k.ExpiresAt), timeOrDash(k.RevokedAt), signatureStatus(k, ring))
	}
	return tw.Flush()
}

func (m *Main) keysRevoke(ctx context.Context, args []string) error {
	fs := m.flags("keys revoke", "[--data DIR | --store URL] KEY_ID")
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

// signatureStatus says whether k's signature verifies under ring: "ok";
// "unsigned" (refused until `writ keys sign`); "unknown signer" (signed by
// a key this ring does not hold: the wrong --keys?); "invalid" (refused:
// its row was changed outside writ).
func signatureStatus(k *auth.Key, ring ringView) string {
	switch err := auth.Verify(k, ring); {
	case err == nil:
		return "ok"
	case errors.Is(err, auth.ErrUnsigned):
		return "unsigned"
	case errors.Is(err, keyring.ErrUnknownKey):
		return "unknown signer"
	default:
		return "invalid"
	}
}

// keysSign signs keys stored without a signature: keys created before
// writ signed them, which servers refuse until they are signed. Signing
// vouches for a row as it stands, so check the keys first (writ keys list
// shows them): a row an attacker added is signed as readily as writ's own.
func (m *Main) keysSign(ctx context.Context, args []string) error {
	fs := m.flags("keys sign", "[--data DIR] [--store URL] [--keys DIR] (--all-unsigned | KEY_ID...)")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	keysDir := fs.String("keys", "", "signing key ring directory that signs the keys (default DATA/keys); WRIT_SIGNING_KEY overrides it")
	all := fs.Bool("all-unsigned", false, "sign every key that has no signature (check writ keys list first)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *all == (fs.NArg() > 0) {
		return usagef("keys sign needs KEY_IDs or --all-unsigned (not both)")
	}
	ks, closeStore, err := openKeyStore(*data, *storeURL, false)
	if err != nil {
		return err
	}
	defer closeStore()
	var keys []*auth.Key
	if *all {
		list, err := ks.APIKeys(ctx, "")
		if err != nil {
			return err
		}
		for _, k := range list {
			if k.SignedBy == "" && len(k.Signature) == 0 {
				keys = append(keys, k)
			}
		}
	} else {
		for _, id := range fs.Args() {
			k, err := ks.APIKey(ctx, id)
			if err != nil {
				return err
			}
			keys = append(keys, k)
		}
	}
	if *keysDir == "" {
		*keysDir = defaultKeysDir(*data)
	}
	now := time.Now()
	signer, err := m.keySigner(*keysDir, *storeURL, now)
	if err != nil {
		return err
	}
	// Refuse before signing any, so a mistake signs nothing.
	for _, k := range keys {
		if k.SignedBy != "" || len(k.Signature) > 0 {
			return &writ.Error{Code: writ.ECONFLICT, Message: fmt.Sprintf("API key %s is signed already (by %s)", k.ID, k.SignedBy)}
		}
	}
	for _, k := range keys {
		if err := auth.Sign(k, signer, now); err != nil {
			return err
		}
		if err := ks.SignAPIKey(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "signed %s (tenant %s, %s, roles %s) with %s\n", k.ID, k.TenantID, k.Subject, joinRoles(k.Roles), k.SignedBy)
	}
	if len(keys) == 0 {
		fmt.Fprintln(m.Stdout, "no unsigned keys")
	}
	return nil
}

func joinRoles(rs []writ.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// expiryTime reads keys create's --expires: a positive Go duration from
// now, or an RFC 3339 time after now.
func expiryTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %s: the key would never open anything; give a positive duration", s)
		}
		return now.Add(d).UTC(), nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q is neither a duration (2160h) nor an RFC 3339 time (2027-03-01T00:00:00Z)", s)
	}
	if !at.After(now) {
		return time.Time{}, fmt.Errorf("--expires %s is not in the future", s)
	}
	return at.UTC(), nil
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// keyActorType is the actor type k acts as: AGENT unless it says otherwise.
func keyActorType(k *auth.Key) string {
	if k.ActorType == "" {
		return writ.ActorAgent
	}
	return k.ActorType
}
