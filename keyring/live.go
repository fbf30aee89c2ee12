package keyring

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Live is a key ring read from a directory that follows the changes
// another process makes to it (`writ ledger keys rotate` or `revoke`
// while a server runs): before each use it compares ring.json's
// modification time and size with what it loaded, and reads the ring
// again when they differ, so a rotation takes effect at the next record,
// not at the next restart. Between changes a signer is kept, so a private
// key file is read once per load. A Live is safe for concurrent use.
type Live struct {
	dir string

	mu      sync.Mutex
	ring    *Ring
	stamp   string
	signers map[string]*Signer
}

// OpenLive reads the key ring in dir (as Open does) and follows it.
func OpenLive(dir string) (*Live, error) {
	l := &Live{dir: dir}
	if err := l.reload(); err != nil {
		return nil, err
	}
	return l, nil
}

// stampOf names the state of ring.json: its modification time and size,
// or "" when it cannot be read.
func stampOf(dir string) string {
	fi, err := os.Stat(filepath.Join(dir, ringFile))
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

// reload reads the ring again. The caller holds l.mu, or l is new.
func (l *Live) reload() error {
	stamp := stampOf(l.dir)
	r, err := Open(l.dir)
	if err != nil {
		return err
	}
	l.ring, l.stamp, l.signers = r, stamp, map[string]*Signer{}
	return nil
}

// fresh returns the ring as it is now, read again if ring.json changed.
// A ring.json that cannot be read again leaves the ring last loaded, with
// the error. The caller holds l.mu.
func (l *Live) fresh() (*Ring, error) {
	if stampOf(l.dir) != l.stamp {
		if err := l.reload(); err != nil {
			return l.ring, err
		}
	}
	return l.ring, nil
}

// Signer returns the signer of the key valid at at, as the ring is now.
func (l *Live) Signer(at time.Time) (*Signer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.fresh()
	if err != nil {
		return nil, err
	}
	for _, k := range r.Keys() {
		if s, ok := l.signers[k.ID]; ok && k.ValidAt(at) {
			return s, nil
		}
	}
	s, err := r.Signer(at)
	if err != nil {
		return nil, err
	}
	l.signers[s.KeyID()] = s
	return s, nil
}

// Ring returns the ring as it is now, read again if ring.json changed.
func (l *Live) Ring() (*Ring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fresh()
}

// Keys returns the ring's public keys as they are now. A ring.json that
// cannot be read again leaves the keys last loaded.
func (l *Live) Keys() []Key {
	r, _ := l.Ring()
	return r.Keys()
}

// VerifyRecordSignature verifies with the ring as it is now, so a key
// rotated in since the ring was opened verifies.
func (l *Live) VerifyRecordSignature(id string, msg, sig []byte, signedAt time.Time) error {
	r, err := l.Ring()
	if err != nil {
		return err
	}
	return r.VerifyRecordSignature(id, msg, sig, signedAt)
}
