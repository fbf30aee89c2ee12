package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// scanner serves stored tree hashes from memory, as a store does: up to
// limit from an index, stopping short at the end.
type scanner struct {
	hashes []tlog.Hash
	failAt int64 // ScanHashes from this index fails (-1: never)
}

func (s scanner) ScanHashes(_ context.Context, _ string, from int64, limit int) ([]tlog.Hash, error) {
	if s.failAt >= 0 && from >= s.failAt {
		return nil, errors.New("scan failed")
	}
	if from >= int64(len(s.hashes)) {
		return nil, nil
	}
	return s.hashes[from:min(from+int64(limit), int64(len(s.hashes)))], nil
}

// compareOnce is the comparison storedHashes does as the tree grows, done
// in one go once the tree is complete: the reference it must agree with.
func compareOnce(ctx context.Context, sc HashScanner, tree []tlog.Hash) (*Finding, error) {
	var idx int64
	for idx < int64(len(tree)) {
		stored, err := sc.ScanHashes(ctx, "acme", idx, storedPageSize)
		if err != nil {
			return nil, err
		}
		for i, h := range stored {
			at := idx + int64(i)
			if at >= int64(len(tree)) {
				break
			}
			if h != tree[at] {
				level, n := tlog.SplitStoredHashIndex(at)
				return &Finding{Kind: FindingTreeHashMismatch, Seq: n<<level + 1, Detail: fmt.Sprintf("stored tree hash %d (level %d, node %d) differs from the records' tree", at, level, n)}, nil
			}
		}
		if len(stored) < storedPageSize {
			if end := idx + int64(len(stored)); end < int64(len(tree)) {
				return &Finding{Kind: FindingTreeHashMismatch, Detail: fmt.Sprintf("the store keeps %d tree hashes; the records' tree has %d (truncated)", end, len(tree))}, nil
			}
			return nil, nil
		}
		idx += storedPageSize
	}
	return nil, nil
}

// TestStoredHashesAsTheTreeGrows compares stored hashes with a tree that
// grows in steps of various sizes, across several pages of stored
// hashes, and wants what comparing once at the end finds.
func TestStoredHashesAsTheTreeGrows(t *testing.T) {
	n := 3*storedPageSize + 77
	tree := make([]tlog.Hash, n)
	for i := range tree {
		tree[i][0], tree[i][1], tree[i][2] = byte(i), byte(i>>8), byte(i>>16)
	}
	edit := func(f func(s []tlog.Hash) []tlog.Hash) []tlog.Hash { return f(append([]tlog.Hash(nil), tree...)) }
	tests := []struct {
		name   string
		stored []tlog.Hash
		failAt int64
		want   string // the finding's detail, or the error
	}{
		{"intact", tree, -1, ""},
		{"more stored than computed", edit(func(s []tlog.Hash) []tlog.Hash { return append(s, tlog.Hash{9}) }), -1, ""},
		{"first hash differs", edit(func(s []tlog.Hash) []tlog.Hash { s[0][5] = 1; return s }), -1, "stored tree hash 0 "},
		{"a hash of the third page differs", edit(func(s []tlog.Hash) []tlog.Hash { s[2*storedPageSize+5][5] = 1; return s }), -1, fmt.Sprintf("stored tree hash %d ", 2*storedPageSize+5)},
		{"two differ", edit(func(s []tlog.Hash) []tlog.Hash { s[storedPageSize+3][5], s[storedPageSize+9][5] = 1, 1; return s }), -1, fmt.Sprintf("stored tree hash %d ", storedPageSize+3)},
		{"last hash differs", edit(func(s []tlog.Hash) []tlog.Hash { s[n-1][5] = 1; return s }), -1, fmt.Sprintf("stored tree hash %d ", n-1)},
		{"truncated within a page", tree[:2*storedPageSize+10], -1, fmt.Sprintf("the store keeps %d tree hashes; the records' tree has %d (truncated)", 2*storedPageSize+10, n)},
		{"truncated at a page boundary", tree[:storedPageSize], -1, fmt.Sprintf("the store keeps %d tree hashes; the records' tree has %d (truncated)", storedPageSize, n)},
		{"nothing stored", nil, -1, fmt.Sprintf("the store keeps 0 tree hashes; the records' tree has %d (truncated)", n)},
		{"scan fails", tree, storedPageSize, "scan failed"},
	}
	for _, tc := range tests {
		for _, step := range []int{1, 64, 5000, n} {
			t.Run(fmt.Sprintf("%s/step %d", tc.name, step), func(t *testing.T) {
				ctx := t.Context()
				sc := scanner{hashes: tc.stored, failAt: tc.failAt}
				wantF, wantErr := compareOnce(ctx, sc, tree)
				s := &storedHashes{src: sc, tenant: "acme"}
				defer s.stop()
				var err error
				for size := step; err == nil && size < n; size += step {
					err = s.compare(ctx, tree[:size], false)
				}
				if err == nil {
					err = s.compare(ctx, tree, true)
				}
				got := ""
				switch {
				case err != nil:
					got = err.Error()
				case s.finding != nil:
					got = s.finding.Detail
				}
				if (err == nil) != (wantErr == nil) || (wantErr != nil && err.Error() != wantErr.Error()) ||
					fmt.Sprint(s.finding) != fmt.Sprint(wantF) {
					t.Errorf("compare = %v, %+v; comparing once = %v, %+v", err, s.finding, wantErr, wantF)
				}
				if tc.want == "" && got != "" || tc.want != "" && (len(got) < len(tc.want) || got[:len(tc.want)] != tc.want) {
					t.Errorf("compare found %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// TestNextAfter pages on by the last record's seq, and forward however the
// seq was forged: never back, never in place.
func TestNextAfter(t *testing.T) {
	sealed := func(seq int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"audit":{"prev_hash":"sha256:00","record_hash":"sha256:11","seq":%d},"record_id":"dr_%d"}`, seq, seq))
	}
	page := func(seqs ...int) []json.RawMessage {
		var p []json.RawMessage
		for _, s := range seqs {
			p = append(p, sealed(s))
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		after int64
		page  []json.RawMessage
		want  int64
	}{
		{"the last seq", 0, page(1, 2, 3), 3},
		{"a gap", 10, page(11, 15, 40), 40},
		{"a forged seq back", 100, page(101, 102, 7), 103},
		{"a forged seq in place", 100, page(101, 100), 102},
		{"an unreadable last record", 5, []json.RawMessage{sealed(6), json.RawMessage(`{}`)}, 7},
		{"an empty page", 9, nil, 9},
	} {
		if got := NextAfter(tc.after, tc.page); got != tc.want {
			t.Errorf("%s: NextAfter(%d, …) = %d, want %d", tc.name, tc.after, got, tc.want)
		}
	}
}
