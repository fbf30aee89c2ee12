// Package witness is writ's client of transparency-log witnesses: it
// submits each tenant's newest checkpoint, with a consistency proof from
// the last checkpoint the witness cosigned, to the witnesses the operator
// configures (C2SP tlog-witness, POST <url>/add-checkpoint), checks the
// cosignatures they return (C2SP tlog-cosignature, cosignature/v1) and
// stores them (ledger.CosignatureStore), so that bundles carry them and
// an auditor can require a quorum of independent witnesses on the newest
// checkpoint (writ ledger verify-bundle --witness).
//
// It runs beside the checkpointer and never on the check path: a witness
// that is down or slow only delays cosignatures. A witness that answers
// that it has cosigned a tree the ledger's does not extend (two histories
// of one log) is a conflict, reported loudly (Status, OnConflict); the
// client never "repairs" one.
//
// The package must never sign checkpoints or decide anything about
// records: it only reads what the ledger signed and stores what witnesses
// answered.
package witness

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Key is a witness's public key: a C2SP signed-note verifier key of type
// 0x04 (Ed25519 cosignature/v1) or 0x06 (ML-DSA-44 cosignature/v1),
//
//	<name>+<key hash, 8 hex digits>+<base64(type byte || public key)>
//
// as the witness's operator publishes it (the transparency-dev witness's
// generate_keys writes one).
type Key struct {
	// Text is the verifier key as given.
	Text     string
	Verifier note.Verifier
}

// Name is the witness's name, the key name of its signature lines.
func (k Key) Name() string { return k.Verifier.Name() }

// Hash is the key hash (key ID) of its signature lines.
func (k Key) Hash() uint32 { return k.Verifier.KeyHash() }

// ParseKey reads a witness verifier key. Its key hash must be the one the
// name and key give (formats' parser does not check it), and its type
// must be a cosignature/v1 type: a plain Ed25519 note key (type 0x01)
// verifies the log's own signatures, not a witness's timestamped ones.
func ParseKey(text string) (Key, error) {
	text = strings.TrimSpace(text)
	name, rest, ok1 := strings.Cut(text, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || name == "" {
		return Key{}, fmt.Errorf("witness key %q is not <name>+<hash>+<key>", text)
	}
	parts := []string{name, hash16, key64}
	raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) == 0 {
		return Key{}, fmt.Errorf("witness key %q: the key is not base64", text)
	}
	if base64.StdEncoding.EncodeToString(raw) != parts[2] {
		return Key{}, fmt.Errorf("witness key %q: the key is not in canonical base64", text)
	}
	if raw[0] != 0x04 && raw[0] != 0x06 {
		return Key{}, fmt.Errorf("witness key %q has type 0x%02x; a witness key is a cosignature/v1 key, type 0x04 (Ed25519) or 0x06 (ML-DSA-44)", text, raw[0])
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || len(parts[1]) != 8 {
		return Key{}, fmt.Errorf("witness key %q: the key hash is not 8 hex digits", text)
	}
	v, err := fnote.NewVerifierForCosignatureV1(text)
	if err != nil {
		return Key{}, fmt.Errorf("witness key %q: %w", text, err)
	}
	if v.KeyHash() != uint32(hash) {
		return Key{}, fmt.Errorf("witness key %q: its key hash should be %08x", text, v.KeyHash())
	}
	return Key{Text: text, Verifier: v}, nil
}

// ReadKeyFile reads a file holding one witness verifier key (and
// nothing else but white space).
func ReadKeyFile(path string) (Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	k, err := ParseKey(string(data))
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Witness is one configured witness: where to submit checkpoints and the
// key its cosignatures must verify with.
type Witness struct {
	// URL is the witness's submission prefix; checkpoints go to
	// URL + "/add-checkpoint".
	URL string
	Key Key
}

// fileConfig is the JSON of a witnesses file (docs/operations.md):
//
//	{"witnesses": [{"url": "https://witness.example/", "key": "<vkey>"}]}
type fileConfig struct {
	Witnesses []struct {
		URL string `json:"url"`
		Key string `json:"key"`
	} `json:"witnesses"`
}

// ParseConfig reads a witnesses file's JSON. Unknown members, a URL that
// is not http or https, a bad key, and the same key twice are errors.
func ParseConfig(data []byte) ([]Witness, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("witnesses: %w", err)
	}
	if dec.More() {
		return nil, errors.New("witnesses: trailing data after the object")
	}
	if len(fc.Witnesses) == 0 {
		return nil, errors.New("witnesses: the file lists no witness")
	}
	var out []Witness
	seen := map[string]bool{}
	for i, w := range fc.Witnesses {
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("witnesses[%d]: url %q is not an http or https URL without query or fragment", i, w.URL)
		}
		k, err := ParseKey(w.Key)
		if err != nil {
			return nil, fmt.Errorf("witnesses[%d]: %w", i, err)
		}
		id := fmt.Sprintf("%s+%08x", k.Name(), k.Hash())
		if seen[id] {
			return nil, fmt.Errorf("witnesses[%d]: key %s is listed twice", i, id)
		}
		seen[id] = true
		out = append(out, Witness{URL: strings.TrimSuffix(w.URL, "/"), Key: k})
	}
	return out, nil
}

// ReadConfigFile reads a witnesses file.
func ReadConfigFile(path string) ([]Witness, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ws, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ws, nil
}
