package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/writhq/writ"
)

// Binder computes the digests that bind idempotency keys, blocked actions
// and (later) approvals to exact inputs. They cover the unredacted values,
// so they are keyed (HMAC-SHA256 with a secret kept outside the ledger):
// a plain hash of arguments that hold a card number could be reversed by
// trying every card number. Digests that must be recomputable from stored
// data alone (record.replay.arguments_digest) cover redacted values instead.
type Binder struct {
	key []byte
}

// MinBindingKeyLen is the shortest binding key accepted.
const MinBindingKeyLen = 32

// NewBinder returns a Binder keyed with key (at least MinBindingKeyLen bytes).
func NewBinder(key []byte) (*Binder, error) {
	if len(key) < MinBindingKeyLen {
		return nil, errors.New("binding key must be at least 32 bytes")
	}
	return &Binder{key: append([]byte(nil), key...)}, nil
}

func (b *Binder) sum(data []byte) string {
	m := hmac.New(sha256.New, b.key)
	m.Write(data)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Arguments binds an action's arguments (their RFC 8785 form; absent
// arguments bind like {}).
func (b *Binder) Arguments(args map[string]any) (string, error) {
	c, err := Canonical(orEmptyMap(args))
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	return b.sum(c), nil
}

// Action fingerprints what a check asks for, for
// must_not_retry_same_action: the action and what it rests on (decision
// key, tool, approval mode, arguments, outputs, subjects, actor,
// workflow, evidence, context), the actor as named (its type, id,
// workload identity and delegated user, not how writ knows them nor the
// key id). What decide never reads is left out
// (idempotency key, trace id, tool call id, intent ref, input refs, tool
// lineage, caller lineage), so a retry that could not change the
// decision binds the same. So is the caller's bookkeeping (usage,
// scorecard): must_not_retry binds the action, and a blocked action
// re-sent with a lower usage or a better scorecard is the same action,
// answered with the earlier decision (issue 31).
func (b *Binder) Action(req *writ.CheckRequest, decisionKey string) (string, error) {
	evidence := req.Evidence
	if evidence == nil {
		evidence = []writ.Evidence{}
	}
	// encoding/json writes map keys sorted and struct fields in order, so
	// this encoding is deterministic; the digest never leaves writ.
	data, err := json.Marshal(map[string]any{
		"decision_key":  decisionKey,
		"tool":          req.Tool,
		"approval_mode": req.ApprovalMode,
		"arguments":     orEmptyMap(req.Arguments),
		"outputs":       orEmptyMap(req.Outputs),
		"subject_ids":   orEmpty(req.SubjectIDs),
		"actor":         req.Actor.Claimed(),
		"workflow":      req.Workflow,
		"evidence":      evidence,
		"context":       orEmptyMap(req.Context),
	})
	if err != nil {
		return "", fmt.Errorf("action: %w", err)
	}
	return b.sum(data), nil
}
