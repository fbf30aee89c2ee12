package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/writhq/writ/auth"
)

// KeyActorColumns returns k's actor type and acts_for patterns as both
// stores keep them: NULL when unset (an AGENT key acting for no one
// else), else the type and a JSON array of patterns.
func KeyActorColumns(k *auth.Key) (actorType, actsFor *string, err error) {
	if k.ActorType != "" {
		actorType = &k.ActorType
	}
	if len(k.ActsFor) > 0 {
		b, err := json.Marshal(k.ActsFor)
		if err != nil {
			return actorType, actsFor, fmt.Errorf("API key %s: acts_for: %w", k.ID, err)
		}
		text := string(b)
		actsFor = &text
	}
	return actorType, actsFor, nil
}

// ScanKeyActor sets k's actor type and acts_for patterns from the
// columns KeyActorColumns wrote ("" for NULL).
func ScanKeyActor(k *auth.Key, actorType, actsFor string) error {
	k.ActorType = actorType
	if actsFor != "" {
		if err := json.Unmarshal([]byte(actsFor), &k.ActsFor); err != nil {
			return fmt.Errorf("API key %s: acts_for: %w", k.ID, err)
		}
	}
	return nil
}
