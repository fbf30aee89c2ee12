package writ

import "context"

// Erasures erases a subject's classified values: the raw values a pack
// classifies as sensitive (docs/pack-format.md, "Classification"), which
// the stored request envelopes hold only as salted commitments. The
// in-process engine and the HTTP client both satisfy it.
type Erasures interface {
	// Erase deletes every classified value of the tenant linked to
	// r.SubjectID, with its salt, and appends an erasure record (decision
	// key "erasure:<pack name>") that lists their references, in one
	// transaction, durable before it returns. Records, envelopes, proofs
	// and checkpoints are untouched and still verify; a replay of a record
	// whose values are erased answers ReplayInputsErased. A subject
	// without stored values is erased too (an erasure of nothing, recorded).
	Erase(ctx context.Context, r *EraseRequest) (*Erasure, error)
}

// EraseRequest asks for a subject's classified values to be erased.
type EraseRequest struct {
	TenantID string `json:"tenant_id,omitempty"`
	// SubjectID is the subject as records name it (subject_ids), such as
	// "customer:cus_77".
	SubjectID string `json:"subject_id"`
	// By names who erases when the server authenticates no one; with an
	// API key it is the key's subject.
	By string `json:"by,omitempty"`
	// Reason says why (a data subject's request, say), for the record.
	Reason  string `json:"reason"`
	TraceID string `json:"trace_id,omitempty"`
}

// Erasure is what an erasure did.
type Erasure struct {
	TenantID  string `json:"tenant_id"`
	SubjectID string `json:"subject_id"`
	// RecordID is the erasure's record.
	RecordID string `json:"record_id"`
	// Erased is how many values were deleted; Refs their references.
	Erased int      `json:"erased"`
	Refs   []string `json:"refs"`
}

// ReplayInputsErased is the status of a replay of a record whose
// classified inputs were erased: the record and its envelope verify, but
// the decision cannot be made again without the values.
const ReplayInputsErased = "inputs_erased"
