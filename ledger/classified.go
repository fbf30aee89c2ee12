package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/writhq/writ/record"
)

// ClassifiedValue is a raw value a pack classifies as sensitive
// (record.Sealed), kept apart from the ledger in the classified store:
// the stored request envelope holds only its reference, a salted
// commitment. It is written with the record whose envelope refers to it,
// in the same transaction, linked to that record's subjects, and it is
// the one thing writ ever deletes: an erasure (Entry.Erasure) deletes a
// subject's values, with its salt, in the transaction that appends the
// erasure's record.
type ClassifiedValue struct {
	TenantID string
	record.Sealed
	// SubjectIDs are the subjects of the record it came with: an erasure
	// of any of them deletes it.
	SubjectIDs []string
	// RecordID is the record whose envelope refers to it (set by Append).
	RecordID string
}

// Erasure deletes classified values of one tenant: those whose
// references Refs lists. It travels with the erasure's record, so the
// values are gone exactly when the record that says so is durable.
type Erasure struct {
	TenantID string
	Refs     []string
}

// ClassifiedStore is the classified store: the raw values behind
// classified references, read by replay and listed for an erasure.
// Both writ stores implement it. Every read is scoped to one tenant.
type ClassifiedStore interface {
	// ClassifiedValues returns the tenant's stored values of refs, by
	// reference; a value erased (or never stored) is absent.
	ClassifiedValues(ctx context.Context, tenantID string, refs []string) (map[string]ClassifiedValue, error)
	// ClassifiedRefs returns the references of the tenant's stored values
	// linked to subjectID, in the order they were stored.
	ClassifiedRefs(ctx context.Context, tenantID, subjectID string) ([]string, error)
}

// CheckClassified checks an entry's classified values and erasure before
// they are written: each value belongs to the entry's tenant and its
// salt and value hash to its reference; an erasure is of the entry's
// tenant.
func CheckClassified(e *Entry) error {
	t := e.Record.TenantID
	for _, v := range e.Classified {
		if v.TenantID != t {
			return fmt.Errorf("classified value %s of record %s names tenant %q, not the record's %q", v.Ref, e.Record.RecordID, v.TenantID, t)
		}
		if len(v.Salt) != record.ClassifiedSaltLen || record.Commit(v.Salt, v.Value) != v.Ref {
			return fmt.Errorf("classified value %s of record %s does not hash to its reference", v.Ref, e.Record.RecordID)
		}
		if v.Rule == "" || v.Classification == "" {
			return fmt.Errorf("classified value %s of record %s names no rule or classification", v.Ref, e.Record.RecordID)
		}
	}
	if x := e.Erasure; x != nil {
		if x.TenantID != t {
			return fmt.Errorf("the erasure of record %s names tenant %q, not the record's %q", e.Record.RecordID, x.TenantID, t)
		}
		for _, r := range x.Refs {
			if !strings.HasPrefix(r, "sha256:") {
				return fmt.Errorf("the erasure of record %s names %q, which is not a classified reference", e.Record.RecordID, r)
			}
		}
	}
	return nil
}
