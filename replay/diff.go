package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Classify names the class of a difference at path (a JSON path in a
// record, as Difference.Path) of a record of kind. packChanged says the
// record was rebuilt under another pack than it pins, which changes its
// pack pins and compiled context along with its policy.
//
//   - evidence_refs, replay.evidence_snapshot_hash: changed_evidence
//     (for a step verdict also replay.arguments_digest, the digest of
//     the result payload it judged);
//   - tool_lineage, replay.tool_transcript_chain_hash,
//     execution.transcript (an execution report's transcript entry):
//     changed_tool_transcript;
//   - replay.compiled_context_hash: changed_compiled_context, or
//     changed_policy when the pack changed;
//   - scorecard: changed_scorecard;
//   - scorecard_failed: changed_policy when the pack changed (its pass
//     mark), changed_scorecard otherwise;
//   - history: changed_history (the values a check read of the
//     tenant's history aggregates);
//   - params: changed_params (the tenant parameter values it read);
//   - policy_decisions, status, outputs.outcome (every output of a step
//     verdict), approvals, approval_mode_effective, controls_active,
//     action_class, decision_version, lineage.pack_version,
//     lineage.pack_hash, lineage.policy_versions and
//     lineage.decision_spec: changed_policy;
//   - anything else: changed_record.
func Classify(kind, path string, packChanged bool) string {
	top, rest := splitPath(path)
	second, _ := splitPath(strings.TrimPrefix(rest, "."))
	switch top {
	case "evidence_refs":
		return ClassEvidence
	case "tool_lineage":
		return ClassToolTranscript
	case "scorecard":
		return ClassScorecard
	case "scorecard_failed":
		if packChanged {
			return ClassPolicy
		}
		return ClassScorecard
	case "history":
		return ClassHistory
	case "params":
		return ClassParams
	case "execution":
		if second == "transcript" {
			return ClassToolTranscript
		}
		return ClassPolicy
	case "policy_decisions", "status", "approvals", "approval_mode_effective", "controls_active", "action_class", "decision_version":
		return ClassPolicy
	case "outputs":
		if second == "outcome" || kind == KindStepVerdict {
			return ClassPolicy
		}
	case "lineage":
		switch second {
		case "pack_version", "pack_hash", "policy_versions", "decision_spec":
			return ClassPolicy
		}
	case "replay":
		switch second {
		case "evidence_snapshot_hash":
			return ClassEvidence
		case "arguments_digest":
			if kind == KindStepVerdict {
				return ClassEvidence
			}
		case "tool_transcript_chain_hash":
			return ClassToolTranscript
		case "compiled_context_hash":
			if packChanged {
				return ClassPolicy
			}
			return ClassCompiledContext
		}
	}
	return ClassRecord
}

// splitPath splits the first member name off a path: "a.b[1]" is "a",
// ".b[1]"; `["x.y"].z` is "x.y", ".z".
func splitPath(p string) (string, string) {
	if strings.HasPrefix(p, `["`) {
		var name string
		dec := json.NewDecoder(strings.NewReader(p[1:]))
		if err := dec.Decode(&name); err == nil {
			off := 1 + int(dec.InputOffset()) + 1 // the closing ']'
			if off <= len(p) {
				return name, p[off:]
			}
		}
		return p, ""
	}
	if i := strings.IndexAny(p, ".["); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// diffRecords compares two records' JSON, without their audit and bound
// blocks (the seal, and the digests of what the store keeps beside the
// record: neither is part of the decision), and returns one Difference
// (unclassified) per path that differs.
func diffRecords(recorded, replayed []byte) ([]Difference, error) {
	a, err := decodeValue(recorded)
	if err != nil {
		return nil, fmt.Errorf("recorded: %w", err)
	}
	b, err := decodeValue(replayed)
	if err != nil {
		return nil, fmt.Errorf("replayed: %w", err)
	}
	for _, m := range []any{a, b} {
		if o, ok := m.(map[string]any); ok {
			delete(o, "audit")
			delete(o, "bound")
		}
	}
	var out []Difference
	walk("", a, b, true, true, &out)
	return out, nil
}

func decodeValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// walk appends the differences between a and b at path. hasA and hasB
// say whether each side has the member at all.
func walk(path string, a, b any, hasA, hasB bool, out *[]Difference) {
	if hasA && hasB {
		switch x := a.(type) {
		case map[string]any:
			if y, ok := b.(map[string]any); ok {
				keys := make([]string, 0, len(x)+len(y))
				for k := range x {
					keys = append(keys, k)
				}
				for k := range y {
					if _, ok := x[k]; !ok {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				for _, k := range keys {
					va, okA := x[k]
					vb, okB := y[k]
					walk(member(path, k), va, vb, okA, okB, out)
				}
				return
			}
		case []any:
			if y, ok := b.([]any); ok && len(x) == len(y) {
				for i := range x {
					walk(path+"["+strconv.Itoa(i)+"]", x[i], y[i], true, true, out)
				}
				return
			}
		}
		if equalJSON(a, b) {
			return
		}
	}
	d := Difference{Path: path}
	if hasA {
		d.Recorded, _ = json.Marshal(a)
	}
	if hasB {
		d.Replayed, _ = json.Marshal(b)
	}
	switch {
	case !hasA:
		d.Detail = "absent from the recorded record"
	case !hasB:
		d.Detail = "absent from the replayed record"
	}
	*out = append(*out, d)
}

func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false // containers of different kinds or lengths
}

// member extends a path with an object member: a.b, or a["b.c"] for a
// name that is not a plain identifier.
func member(path, name string) string {
	plain := name != ""
	for _, c := range name {
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			plain = false
			break
		}
	}
	if !plain {
		q, _ := json.Marshal(name)
		return path + "[" + string(q) + "]"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}
