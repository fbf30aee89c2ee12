package policy

import "github.com/writhq/writ"

// FailClosed is the decision of a check writ could not decide and
// durably record (a store read or the commit failed, or the record broke
// a validation rule): the action must not run, and the caller retries
// the check later. code names what failed (record_not_committed,
// ledger_overloaded, ...) and message says it. Its receipt is built by
// Receipt, as every receipt is.
func FailClosed(code, message string) *Decision {
	return &Decision{Effect: ReplanLocal, Applied: []Applied{{Verdict: ReplanLocal, Firing: &Firing{
		Reason:    writ.Reason{Code: code, Message: message},
		NextSteps: []writ.Reason{{Code: "RETRY_CHECK_LATER", Message: "Retry the same check after a short delay; do not perform the action until a receipt allows it."}},
		Awaits:    []string{"writ's ledger accepts the record again."},
	}}}}
}
