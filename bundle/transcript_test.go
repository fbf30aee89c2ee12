package bundle_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/bundle"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/keyring"
	"github.com/writhq/writ/ledger/verify"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/record"
	"github.com/writhq/writ/sqlite"
	"github.com/writhq/writ/transcript"
)

// transcriptFixture is a bundle of a filesystem pack's ledger with tool
// transcripts: three writes checked and reported in one MCP session, and
// one in another, each report's record carrying its transcript entry. It
// is deterministic (seeded keys, seeded random, a fixed clock); `go test
// ./bundle -run TestTranscriptFixture -update` regenerates it.
const transcriptFixture = "testdata/transcripts.tar.gz"

const filesPack = "../examples/mcp-files"

// buildTranscriptBundle builds transcriptFixture's bundle.
func buildTranscriptBundle(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	ring := seededRing(t, "writ-fixture", 0x43, exampleClock.Add(-time.Hour))
	p, err := pack.Load(filesPack)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: bindingKey, Keys: keySource(ring), Random: newSeededReader(6),
		Now: func() time.Time { return exampleClock }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for i, session := range []string{"mcp:s1", "mcp:s1", "mcp:s1", "mcp:s2"} {
		content := fmt.Sprintf("draft %d", i+1)
		rc, err := eng.Check(ctx, &writ.CheckRequest{TenantID: "demo", Tool: "fs.write_file", ToolCallID: fmt.Sprintf("mcp_write_%d", i+1),
			Arguments:    map[string]any{"path": "/home/me/demo/sandbox/draft.txt", "content": content},
			Actor:        writ.Actor{Type: writ.ActorAgent, ID: "quickstart-agent"},
			ApprovalMode: writ.ModeDestructive, InputsRefs: &writ.InputsRefs{Session: session}})
		if err != nil {
			t.Fatal(err)
		}
		if !rc.SafeToExecute {
			t.Fatalf("write %d: %s %+v, want allowed", i+1, rc.Outcome, rc.Reasons)
		}
		if _, err := eng.ReportExecution(ctx, &writ.ExecutionReport{TenantID: "demo", DecisionID: rc.DecisionID, Status: writ.ExecutionSucceeded,
			ResultDigest: record.Digest([]byte(content))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return export(t, st, ring.Keys())
}

// readFixture returns the plain archive of a checked-in .tar.gz fixture.
func readFixture(t *testing.T, path string) *archive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return readArchive(t, plain)
}

// entryOf returns the transcript entry a record line carries, or nil.
func entryOf(t *testing.T, line []byte) *writ.TranscriptEntry {
	t.Helper()
	var rec writ.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Execution == nil {
		return nil
	}
	return rec.Execution.Transcript
}

// reports returns the indexes of the lines that carry transcript entries.
func reports(t *testing.T, lines [][]byte) []int {
	t.Helper()
	var out []int
	for i, l := range lines {
		if entryOf(t, l) != nil {
			out = append(out, i)
		}
	}
	return out
}

// setEntry replaces the transcript entry line i carries with e, and its
// replay.tool_transcript_chain_hash with chainHash, byte for byte in the
// record's canonical form (the record is not sealed again here).
func setEntry(t *testing.T, lines [][]byte, i int, e *writ.TranscriptEntry, chainHash string) {
	t.Helper()
	var rec writ.Record
	if err := json.Unmarshal(lines[i], &rec); err != nil {
		t.Fatal(err)
	}
	old, err := record.Canonical(rec.Execution.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	repl, err := record.Canonical(e)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(lines[i], old) != 1 {
		t.Fatalf("line %d: its entry's canonical form is not found once", i)
	}
	l := bytes.Replace(lines[i], old, repl, 1)
	oldHash := `"tool_transcript_chain_hash":"` + rec.Replay.ToolTranscriptChainHash + `"`
	if bytes.Count(l, []byte(oldHash)) != 1 {
		t.Fatalf("line %d: its tool_transcript_chain_hash is not found once", i)
	}
	lines[i] = bytes.Replace(l, []byte(oldHash), []byte(`"tool_transcript_chain_hash":"`+chainHash+`"`), 1)
}

// relink re-links the entries of run after line from onto it (seq one
// more, prev the head before, head recomputed), as an attacker hiding a
// change would: what is left to catch is the changed entry itself.
func relink(t *testing.T, lines [][]byte, from int) {
	t.Helper()
	last := entryOf(t, lines[from])
	for i := from + 1; i < len(lines); i++ {
		e := entryOf(t, lines[i])
		if e == nil || e.Run != last.Run {
			continue
		}
		n, err := transcript.Next(e.Run, last, e.Call)
		if err != nil {
			t.Fatal(err)
		}
		setEntry(t, lines, i, n, n.Head)
		last = n
	}
}

// rehead recomputes e's head.
func rehead(t *testing.T, e *writ.TranscriptEntry) {
	t.Helper()
	h, err := transcript.Head(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Head = h
}

// TestTranscriptFixture: the checked-in bundle with tool transcripts
// verifies intact, and each change to a transcript, with the chain and
// its checkpoints re-sealed and re-signed with the signing key (so that
// no hash, signature or root can catch it), is caught as
// transcript_broken, and only as that.
func TestTranscriptFixture(t *testing.T) {
	if *update {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(buildTranscriptBundle(t))
		zw.Close()
		if err := os.WriteFile(transcriptFixture, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bundle.OpenFile(transcriptFixture)
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyBundle(t, b)
	b.Close()
	if !rep.Intact() || rep.Records != 8 {
		t.Fatalf("%s: %d records, findings %+v; want 8 (four checks, four reports) and none", transcriptFixture, rep.Records, rep.Findings)
	}
	base := readFixture(t, transcriptFixture)
	if rs := reports(t, base.lines("demo")); len(rs) != 4 {
		t.Fatalf("%s: %d records carry transcript entries, want 4", transcriptFixture, len(rs))
	}
	ring := seededRing(t, "writ-fixture", 0x43, exampleClock.Add(-time.Hour))
	signer, err := ring.Signer(exampleClock)
	if err != nil {
		t.Fatal(err)
	}
	const zero = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	cases := []struct {
		name string
		// tamper changes lines, whose reports (in chain order: three of
		// session mcp:s1, then one of mcp:s2) are at rs, and returns the
		// first line it changed.
		tamper func(t *testing.T, lines [][]byte, rs []int) int
		want   []string // finding kinds
		detail string   // what the finding says
	}{
		{"nothing changed, the chain re-sealed", func(t *testing.T, lines [][]byte, rs []int) int { return 0 }, nil, ""},
		{"an entry's prev changed", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[1]])
			e.Prev = zero
			rehead(t, e)
			setEntry(t, lines, rs[1], e, e.Head)
			relink(t, lines, rs[1])
			return rs[1]
		}, []string{verify.FindingTranscriptBroken}, "entry 2: its prev is"},
		{"an entry's seq skips one", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[1]])
			e.Seq = 3
			rehead(t, e)
			setEntry(t, lines, rs[1], e, e.Head)
			relink(t, lines, rs[1])
			return rs[1]
		}, []string{verify.FindingTranscriptBroken}, "entry 3: seq 3 follows seq 1"},
		{"an entry moved to another transcript", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[2]])
			e.Run = "session:mcp:s2"
			rehead(t, e)
			setEntry(t, lines, rs[2], e, e.Head)
			relink(t, lines, rs[2])
			return rs[2]
		}, []string{verify.FindingTranscriptBroken}, "transcript session:mcp:s2 entry 3: seq 3 follows seq 0"},
		{"two reports' records swapped in the chain", func(t *testing.T, lines [][]byte, rs []int) int {
			lines[rs[1]], lines[rs[2]] = lines[rs[2]], lines[rs[1]]
			return rs[1]
		}, []string{verify.FindingTranscriptBroken}, "seqs are contiguous from 1"},
		{"an entry's call changed, its head kept", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[0]])
			e.Call.Status = writ.ExecutionFailed
			setEntry(t, lines, rs[0], e, e.Head)
			return rs[0]
		}, []string{verify.FindingTranscriptBroken}, "run, seq, prev and call hash to"},
		{"a report's chain hash not its entry's head", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[1]])
			setEntry(t, lines, rs[1], e, entryOf(t, lines[rs[0]]).Head)
			return rs[1]
		}, []string{verify.FindingTranscriptBroken}, "tool_transcript_chain_hash"},
		{"an entry naming another permit", func(t *testing.T, lines [][]byte, rs []int) int {
			e := entryOf(t, lines[rs[1]])
			e.Call.Permit = entryOf(t, lines[rs[0]]).Call.Permit
			rehead(t, e)
			setEntry(t, lines, rs[1], e, e.Head)
			relink(t, lines, rs[1])
			return rs[1]
		}, []string{verify.FindingTranscriptBroken}, "the call's permit is"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base.clone()
			lines := a.lines("demo")
			from := c.tamper(t, lines, reports(t, lines))
			wantOnly(t, resealed(t, a, "demo", lines, from, signer), c.want, c.detail)
		})
	}
}

// resealed re-chains tenant's lines from index from on (each record's
// prev_hash, hash and signature), puts them and the new head in a, seals
// the tenant's checkpoints again and verifies the bundle: a tamper made
// this way passes every signature and chain check, so only a check of
// what the records say can catch it.
func resealed(t *testing.T, a *archive, tenant string, lines [][]byte, from int, signer *keyring.Signer) *verify.Report {
	t.Helper()
	rechain(t, lines, from, signer)
	setHead(t, a, tenant, audit(t, lines[len(lines)-1]).RecordHash)
	a.setLines(tenant, lines)
	a.reseal(t, tenant, signer)
	return verifyBundle(t, openBytes(t, a.bytes(t)))
}

// wantOnly wants exactly the finding kinds want, each saying detail.
func wantOnly(t *testing.T, rep *verify.Report, want []string, detail string) {
	t.Helper()
	if got := kinds(rep); !slices.Equal(got, want) {
		t.Errorf("findings %v, want %v:", got, want)
		for _, f := range rep.Findings {
			t.Logf("  %s seq %d: %s", f.Kind, f.Seq, f.Detail)
		}
	}
	for _, f := range rep.Findings {
		if !strings.Contains(f.Detail, detail) {
			t.Errorf("finding %s %q, want it to say %q", f.Kind, f.Detail, detail)
		}
	}
}
