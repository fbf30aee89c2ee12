package keyring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/internal/durable"
)

// On-disk layout of a ring directory.
const (
	ringFile      = "ring.json" // public metadata
	keySuffix     = ".key"      // <name>.key: one private key
	ringVersion   = 1           // ring.json's format version
	maxRingFile   = 1 << 20
	maxKeyFile    = 4 << 10
	dirMode       = 0o700
	keyFileMode   = 0o600
	ringFileMode  = 0o644
	groupOtherAll = 0o077
	groupOtherW   = 0o022
)

// ringJSON is the content of ring.json.
type ringJSON struct {
	Version int   `json:"version"`
	Keys    []Key `json:"keys"`
}

func keyPath(dir, name string) string { return filepath.Join(dir, name+keySuffix) }

// checkModes reports whether permission bits can be checked here: not on
// Windows, where Go reports synthesized modes.
var checkModes = runtime.GOOS != "windows"

func checkDirMode(dir string, mode fs.FileMode) error {
	if checkModes && mode.Perm()&groupOtherW != 0 {
		return invalidf("key ring directory %s has mode %04o: it must not be writable by group or others (chmod 700 %s)", dir, mode.Perm(), dir)
	}
	return nil
}

func checkKeyFileMode(path string, mode fs.FileMode) error {
	if !mode.IsRegular() {
		return invalidf("private key file %s is not a regular file", path)
	}
	if checkModes && mode.Perm()&groupOtherAll != 0 {
		return invalidf("private key file %s has mode %04o: it must not be accessible by group or others (chmod 600 %s)", path, mode.Perm(), path)
	}
	return nil
}

// readDir checks the ring directory's permissions and every private key
// file's, and reads ring.json. A missing directory or ring.json is an
// empty ring.
func readDir(dir string) ([]Key, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if !fi.IsDir() {
		return nil, invalidf("key ring %s is not a directory", dir)
	}
	if err := checkDirMode(dir, fi.Mode()); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), keySuffix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follows symlinks: the key's own mode counts
		if err != nil {
			return nil, fmt.Errorf("key ring: %w", err)
		}
		if err := checkKeyFileMode(path, fi.Mode()); err != nil {
			return nil, err
		}
	}

	path := filepath.Join(dir, ringFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, invalidf("%s is not a regular file", path)
	}
	if checkModes && fi.Mode().Perm()&groupOtherW != 0 {
		return nil, invalidf("%s has mode %04o: it must not be writable by group or others (chmod 644 %s)", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRingFile+1))
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if len(data) > maxRingFile {
		return nil, invalidf("%s is larger than %d bytes", path, maxRingFile)
	}
	var rj ringJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return nil, invalidf("%s: %v", path, err)
	}
	if dec.More() {
		return nil, invalidf("%s: data after the ring", path)
	}
	if rj.Version != ringVersion {
		return nil, invalidf("%s: format version %d, want %d", path, rj.Version, ringVersion)
	}
	return rj.Keys, nil
}

// ensureDir creates the ring directory (mode 0700) if it is missing, and
// checks its mode if it is there.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return invalidf("key ring %s is not a directory", dir)
		}
		return checkDirMode(dir, fi.Mode())
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("key ring: %w", err)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("key ring: %w", err)
	}
	if err := os.Chmod(dir, dirMode); err != nil { // whatever the umask
		return fmt.Errorf("key ring: %w", err)
	}
	return syncDir(filepath.Dir(dir))
}

// writeKeyFile writes a private key to <name>.key (mode 0600), never
// replacing an existing file, durably: the whole key or no file, synced
// with its directory before it is used.
func writeKeyFile(dir, name, skey string) (path string, err error) {
	path = keyPath(dir, name)
	err = durable.Create(path, []byte(skey+"\n"), keyFileMode)
	if errors.Is(err, durable.ErrExist) {
		return "", writ.Errorf(writ.ECONFLICT, "private key file %s already exists", path)
	} else if err != nil {
		return "", fmt.Errorf("key ring: %w", err)
	}
	return path, nil
}

// writeRing replaces ring.json atomically and durably: a synced
// temporary file renamed over it, then the directory synced.
func writeRing(dir string, keys []Key) error {
	if keys == nil {
		keys = []Key{}
	}
	data, err := json.MarshalIndent(ringJSON{Version: ringVersion, Keys: keys}, "", "  ")
	if err != nil {
		return fmt.Errorf("key ring: %w", err)
	}
	data = append(data, '\n')
	if err := durable.WriteFile(filepath.Join(dir, ringFile), data, ringFileMode); err != nil {
		return fmt.Errorf("key ring: %w", err)
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("key ring: %w", err)
	}
	return nil
}

// readKeyFile reads the private key of k from its key file, checking the
// file's mode on the open file and that it holds k's key. Errors never
// include the file's content.
func readKeyFile(dir string, k Key) (*signerKey, error) {
	path := keyPath(dir, k.Name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, wrapf(writ.ENOTFOUND, ErrNoActiveKey, "signing key %s is active but its private key file %s is missing", k.ID, path)
	} else if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if err := checkKeyFileMode(path, fi.Mode()); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	defer clear(data)
	if err != nil {
		return nil, fmt.Errorf("key ring: read %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, invalidf("private key file %s is larger than %d bytes", path, maxKeyFile)
	}
	sk, err := parseSignerKey(string(data))
	if err != nil {
		return nil, invalidf("private key file %s: %v", path, err)
	}
	if sk.vkey != k.VerifierKey {
		return nil, invalidf("private key file %s does not hold the private key of %s", path, k.ID)
	}
	return sk, nil
}
