// Package pinned serves the packs that records pin: each rebuilt from
// its stored blobs (pack.LoadPinned) and compiled (policy.Compile) once,
// however many records of it are checked at the same time. The record
// rules of ledger/verify take their compiled packs from it, so the
// verifier compiles nothing itself. It reads blobs and never writes.
package pinned

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
)

// Packs rebuilds and compiles pinned packs from a blob source, and keeps
// those it compiled. It is safe for concurrent use.
type Packs struct {
	blobs pack.BlobReader
	mu    sync.Mutex
	packs map[string]*policy.Policy // loaded and compiled; a failed load is not kept
	loads singleflight.Group
}

// NewPacks returns the pinned packs stored in blobs (a store, or an
// export bundle).
func NewPacks(blobs pack.BlobReader) *Packs {
	return &Packs{blobs: blobs, packs: map[string]*policy.Policy{}}
}

// Pinned returns the compiled pack that hash pins, its pack in
// Policy.Pack, loading it once however many callers ask for it at the
// same time. Only a loaded pack is kept: a failed load (a cancelled read,
// a transient store error) is the error of the callers that asked during
// it, and the next caller loads again. The lock guards the map, never a
// read, so packs of other hashes are served while one pack loads.
func (p *Packs) Pinned(ctx context.Context, hash string) (*policy.Policy, error) {
	p.mu.Lock()
	pol, ok := p.packs[hash]
	p.mu.Unlock()
	if ok {
		return pol, nil
	}
	ch := p.loads.DoChan(hash, func() (any, error) {
		// Every caller waiting for the pack shares this load, so it is
		// not ended by the first caller's cancellation; each caller stops
		// waiting when its own context ends.
		pk, err := pack.LoadPinned(context.WithoutCancel(ctx), p.blobs, hash)
		if err != nil {
			return nil, err
		}
		pol, err := policy.Compile(pk)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.packs[hash] = pol
		p.mu.Unlock()
		return pol, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*policy.Policy), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
