package record

import (
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

// ExecutionKeyPrefix starts the decision key of an execution report's
// record: "execution:" and the decision key of the record it closes.
const ExecutionKeyPrefix = "execution:"

// StoryKind returns the kind of a record in a decision's story, by its
// decision key (writ.StoryCheck, StoryApproval, StoryExecution, ...).
func StoryKind(key string) string {
	switch {
	case strings.HasPrefix(key, "approval:"):
		return writ.StoryApproval
	case strings.HasPrefix(key, ExecutionKeyPrefix):
		return writ.StoryExecution
	case strings.HasPrefix(key, "workflow:"):
		return writ.StoryVerdict
	}
	if k := AnnotationKind(key); k != "" {
		return k
	}
	return writ.StoryCheck
}

// AnnotationKind returns the kind of a record about a record with
// decision key key (writ.StoryRetraction, StoryFeedback,
// StoryReplayResult), or "" for any other record.
func AnnotationKind(key string) string {
	switch {
	case strings.HasPrefix(key, writ.RetractionKeyPrefix):
		return writ.StoryRetraction
	case strings.HasPrefix(key, writ.FeedbackKeyPrefix):
		return writ.StoryFeedback
	case strings.HasPrefix(key, writ.ReplayKeyPrefix):
		return writ.StoryReplayResult
	}
	return ""
}

// Permits reports whether a check record permitted its effect: a check's
// record is DECIDED or IN_FLIGHT exactly when its receipt was safe to
// execute.
func Permits(rec *writ.Record) bool {
	return StoryKind(rec.DecisionKey) == writ.StoryCheck && (rec.Status == writ.StatusDecided || rec.Status == writ.StatusInFlight)
}

// RedactionRuleIDs are the ids of the pack's redaction rules, in pack
// order: a record's controls_active.redaction_rules_active.
func RedactionRuleIDs(p *pack.Pack) []string {
	out := []string{}
	for _, r := range p.Controls.Redaction {
		out = append(out, r.ID)
	}
	return out
}

// HasNUL reports whether JSON text holds a string with U+0000, which no
// store can keep as text (PostgreSQL refuses it). Every backslash in
// encoded JSON starts an escape, so escapes are skipped whole.
func HasNUL(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case 0:
			return true
		case '\\':
			if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
				return true
			}
			i++ // skip the escaped character
		}
	}
	return false
}

// ErrNUL refuses input holding U+0000 (see HasNUL).
var ErrNUL = &writ.Error{Code: writ.EINVALID, Message: "text must not contain the NUL character (U+0000)"}
