package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writhq/writ"
)

// A named pattern is defined once in controls.yaml and used by both a
// redaction rule (named_patterns) and a condition (patterns.<id>): the
// control refuses a refund whose note holds a card number, and the note's
// card number never reaches the ledger.
func TestNamedPatterns(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(example("refund"))); err != nil {
		t.Fatal(err)
	}
	controls := `patterns:
  - id: card_number
    description: Anything that looks like a card number inside text.
    regex: '\b[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{1,7}\b'
must_refuse:
  - id: card_in_note
    when: has(context.note) && context.note.matches(patterns.card_number)
    reason: {code: card_in_note, message: A note may not hold a card number.}
approval_gates:
  - {id: GATE_FINANCE_APPROVAL, target_hint: finance_approvers}
redaction:
  - id: pan
    fields: [card_number, pan]
  - id: credit_card
    named_patterns: [card_number]
`
	if err := os.WriteFile(filepath.Join(dir, "controls.yaml"), []byte(controls), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir)
	ctx := context.Background()
	req := refundRequest(t, "refund-allow")
	req.Context["note"] = "customer read out card 4111 1111 1111 1111 on the call"
	rc, err := h.eng.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != writ.OutcomeGoalFailTerminal || rc.Reasons[0].Code != "card_in_note" {
		t.Errorf("Check(note with a card) = %s: %s; want the card_in_note control to deny", rc.Outcome, reasonCodes(rc))
	}
	rec, err := h.eng.Record(ctx, "acme", rc.Metadata.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	envelope, err := h.store.Envelope(ctx, "acme", rec.Record.Audit.Seq, rec.Record.Replay.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(envelope), "4111") || !strings.Contains(string(envelope), "[redacted:credit_card]") {
		t.Errorf("the stored envelope does not hold the note redacted by the named pattern: %s", envelope)
	}
	h.verify(t)
}
