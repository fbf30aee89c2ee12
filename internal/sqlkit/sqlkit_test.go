package sqlkit

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/writhq/writ"
)

// TestReadMigrations: migrations are read in order when numbered 1, 2, 3…
// and refused with the name they should have had at the first gap.
func TestReadMigrations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  string // error text, or "" for none
	}{
		{"in order", []string{"0001_a.sql", "0002_b.sql"}, ""},
		{"a gap", []string{"0001_a.sql", "0003_c.sql"}, "want the name 0002_*.sql"},
		{"no number", []string{"init.sql"}, "want the name 0001_*.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys["m/"+f] = &fstest.MapFile{Data: []byte("-- " + f)}
			}
			ms, err := ReadMigrations(fsys, "m")
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("ReadMigrations = %v, want an error saying %q", err, tc.want)
				}
				return
			}
			if err != nil || len(ms) != len(tc.files) {
				t.Fatalf("ReadMigrations = %d, %v", len(ms), err)
			}
			for i, m := range ms {
				if m.Version != i+1 || m.Name != tc.files[i] || m.SQL != "-- "+tc.files[i] {
					t.Errorf("migration %d = %+v", i, m)
				}
			}
		})
	}
}

// TestPrefixEnd: every string with the prefix sorts below PrefixEnd, and
// the next prefix in byte order does not.
func TestPrefixEnd(t *testing.T) {
	end := PrefixEnd("support.")
	for _, s := range []string{"support.", "support.refund.execute", "support.\U0010FFFE"} {
		if !(s < end) {
			t.Errorf("%q is not below PrefixEnd", s)
		}
	}
	if !("support/" > end) {
		t.Errorf("support/ sorts below PrefixEnd(support.)")
	}
}

// TestQueryTerms: a record query filters by the terms it sets, in a
// fixed order, and by none when it sets none.
func TestQueryTerms(t *testing.T) {
	if got := QueryTerms(writ.RecordQuery{}); len(got) != 0 {
		t.Errorf("QueryTerms(no filter) = %v", got)
	}
	got := QueryTerms(writ.RecordQuery{Approver: "maria", PolicyDecisionID: "pd:x"})
	want := []Term{{TermPolicyDecisionID, "pd:x"}, {TermApprover, "maria"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("QueryTerms = %v, want %v", got, want)
	}
}
