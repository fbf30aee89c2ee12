// Package writ is the domain of writ, a governance runtime for AI agents.
//
// writ sits at the boundaries where agents cause side effects and answers,
// with typed and durable artifacts, three questions:
//
//   - May this side effect happen now? A boundary check answers with a
//     [Receipt] (the decision receipt contract).
//   - Is this step really done? Verification contracts accept a workflow
//     run's step only on evidence: an attempt gets a [StepVerdict], and a
//     tool call counts when writ observed it, not when the agent claims it.
//   - What was decided, on what evidence, under which rules? Every governed
//     decision emits a [Record] into an append-only, hash-chained ledger.
//
// This package holds only the vocabulary: requests, receipts, records, error
// kinds and the [Service] interface that both the in-process engine
// (package engine) and the HTTP client (package httpapi) satisfy. It performs
// no I/O and imports no adapter.
package writ
