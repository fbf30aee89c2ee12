package writ

import (
	"context"
	"time"
)

// Records about records. A retraction, a feedback entry and a replay's
// result are decision records of their own, sealed and chained like every
// other, under the decision id of the record they are about, so the
// decision's story and its trace hold them. None edits the record it is
// about: records are never updated. docs/ledger-format.md §2.2 defines
// their members.
const (
	// RetractionKeyPrefix starts the decision key of a retraction's
	// record: "retraction:" and the decision key of the record it
	// retracts. A retraction is CLOSED and supersedes the record it
	// retracts without replacing it: the retracted record stays
	// verifiable and queryable, flagged as retracted.
	RetractionKeyPrefix = "retraction:"
	// FeedbackKeyPrefix starts the decision key of a feedback entry's
	// record: "feedback:" and the decision key of the record it is about.
	FeedbackKeyPrefix = "feedback:"
	// ReplayKeyPrefix starts the decision key of a replay result's
	// record: "replay:" and the decision key of the record replayed. Its
	// outputs.outcome is the replay's status.
	ReplayKeyPrefix = "replay:"
)

// RetractRequest retracts a record: who, why and which record.
type RetractRequest struct {
	TenantID string `json:"tenant_id,omitempty"`
	RecordID string `json:"record_id,omitempty"`
	// By is who retracts it; with API keys, the key's subject.
	By string `json:"by,omitempty"`
	// Reason says why, for the record (required).
	Reason  string `json:"reason"`
	TraceID string `json:"trace_id,omitempty"`
}

// FeedbackRequest is a feedback entry on a record.
type FeedbackRequest struct {
	TenantID string `json:"tenant_id,omitempty"`
	RecordID string `json:"record_id,omitempty"`
	// Score is a number in [0, 1], optional.
	Score *float64 `json:"score,omitempty"`
	// Label names the feedback ("correct", "wrong_outcome", ...); required.
	Label   string `json:"label"`
	Comment string `json:"comment,omitempty"`
	// Author is who gives it; with API keys, the key's subject.
	Author string `json:"author,omitempty"`
	// RuleChange optionally links the change this feedback led to (a pack
	// version, a commit, a ticket).
	RuleChange string `json:"rule_change,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
}

// AnnotationAck is the answer to a retraction, a feedback entry or a
// recorded replay result: the record sealed for it.
type AnnotationAck struct {
	TenantID string `json:"tenant_id"`
	// RecordID is the new record's id; About the record it is about.
	RecordID   string `json:"record_id"`
	About      string `json:"about"`
	DecisionID string `json:"decision_id"`
	// Kind is retraction, feedback or replay_result.
	Kind    string `json:"kind"`
	Status  Status `json:"status"`
	Outcome string `json:"outcome"`
	TraceID string `json:"trace_id"`
}

// Kinds of records about records (AnnotationAck.Kind, StoryRecord.Kind).
const (
	StoryRetraction   = "retraction"
	StoryFeedback     = "feedback"
	StoryReplayResult = "replay_result"
)

// RecordLinks is what the ledger holds about one record besides the
// record: the records that supersede it (corrections, retractions,
// execution reports, re-checks), whether it is retracted, its feedback
// entries and its latest recorded replay.
type RecordLinks struct {
	TenantID string `json:"tenant_id"`
	RecordID string `json:"record_id"`
	// SupersededBy lists the records that name it in supersedes, in
	// chain order.
	SupersededBy []string `json:"superseded_by"`
	// Retracted is set when a retraction names it; RetractedBy is the
	// first such retraction's record.
	Retracted   bool   `json:"retracted"`
	RetractedBy string `json:"retracted_by,omitempty"`
	// Feedback lists its feedback entries' records, in chain order.
	Feedback []string `json:"feedback"`
	// Replay is its latest recorded replay, absent when it was never
	// replayed with the result recorded.
	Replay *LastReplay `json:"replay,omitempty"`
}

// LastReplay is a record's latest recorded replay.
type LastReplay struct {
	// LastStatus is replay_equal, diff or error.
	LastStatus string    `json:"last_status"`
	Classes    []string  `json:"classes,omitempty"`
	RecordID   string    `json:"record_id"`
	At         time.Time `json:"at"`
	Replays    int       `json:"replays"`
}

// Annotations seals records about records.
type Annotations interface {
	// Retract seals a retraction of a record, durable before it returns.
	// A record already retracted is ECONFLICT; a record the tenant does
	// not have is ENOTFOUND. Records about records cannot be retracted.
	Retract(ctx context.Context, r *RetractRequest) (*AnnotationAck, error)
	// Feedback seals a feedback entry on a record.
	Feedback(ctx context.Context, r *FeedbackRequest) (*AnnotationAck, error)
	// RecordReplay seals the result of a replay of one of the tenant's
	// records. The replay of a replay result's own record is not
	// recorded (ECONFLICT): it would only record itself again. Records
	// about records other than replay results cannot be retracted or
	// given feedback (ECONFLICT).
	RecordReplay(ctx context.Context, res *ReplayResult) (*AnnotationAck, error)
	// Links returns what the ledger holds about a record.
	Links(ctx context.Context, tenantID, recordID string) (*RecordLinks, error)
}
