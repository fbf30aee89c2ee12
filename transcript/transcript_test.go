package transcript_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/transcript"
)

// chain builds n linked entries of run.
func chain(t *testing.T, run string, n int) []*writ.TranscriptEntry {
	t.Helper()
	var out []*writ.TranscriptEntry
	var last *writ.TranscriptEntry
	for i := range n {
		e, err := transcript.Next(run, last, writ.TranscriptCall{Tool: "idv.check_identity", Status: "succeeded", DecisionID: "dec_" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		out, last = append(out, e), e
	}
	return out
}

func TestChainsCatchEveryBreak(t *testing.T) {
	good := chain(t, "run:r1", 3)
	if good[0].Seq != 1 || good[0].Prev != "" || good[2].Seq != 3 || good[2].Prev != good[1].Head {
		t.Fatalf("Next does not link: %+v", good)
	}
	for _, tc := range []struct {
		name   string
		tamper func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry
		want   string // the one break's reason; "" when the chain holds
	}{
		{"untouched", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { return es }, ""},
		{"a call changed", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { es[1].Call.Status = "failed"; return es }, "hash to"},
		{"a head forged", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { es[1].Head = es[0].Head; return es }, "hash to"},
		{"an entry dropped", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { return append(es[:1], es[2:]...) }, "seq 3 follows seq 1"},
		{"an entry repeated", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { return append(es[:2], es[1:]...) }, "seq 2 follows seq 2"},
		{"moved to another run", func(es []*writ.TranscriptEntry) []*writ.TranscriptEntry { es[3].Run = "run:r2"; return es }, "hash to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := tc.tamper(chain(t, "run:r1", 4))
			var c transcript.Chains
			var got []error
			for _, e := range es {
				if err := c.Add(e); err != nil {
					got = append(got, err)
				}
			}
			if tc.want == "" {
				if len(got) != 0 || c.Head("run:r1") != es[3].Head {
					t.Fatalf("good chain: breaks %v, head %q want %q", got, c.Head("run:r1"), es[3].Head)
				}
				return
			}
			// A break is reported once: the entries after it chain on
			// from the broken one.
			var b *transcript.Break
			if len(got) != 1 || !errors.As(got[0], &b) || !strings.Contains(b.Reason, tc.want) {
				t.Fatalf("Add over the tampered chain: breaks %v, want one saying %q", got, tc.want)
			}
		})
	}
}

func TestNextRefusesAnotherRunsHead(t *testing.T) {
	other := chain(t, "session:s1", 1)[0]
	if _, err := transcript.Next("run:r1", other, writ.TranscriptCall{Tool: "t"}); err == nil {
		t.Fatal("an entry was built on another transcript's head")
	}
	if _, err := transcript.Next("", nil, writ.TranscriptCall{Tool: "t"}); err == nil {
		t.Fatal("an entry was built with no transcript name")
	}
}
