package writ

import (
	"errors"
	"fmt"
)

// Error codes. Each adapter maps them to its own vocabulary in one place
// (HTTP statuses in httpapi, exit codes in cmd/writ).
const (
	EINVALID         = "invalid"         // the input is malformed or breaks a rule of the contract
	ENOTFOUND        = "not_found"       // the thing does not exist (or is not visible to the caller)
	ECONFLICT        = "conflict"        // the input contradicts what is already recorded
	ETOOLARGE        = "too_large"       // the input exceeds a size limit
	EUNAVAILABLE     = "unavailable"     // writ cannot take the work now (overload, store down); retry later
	EUNAUTHENTICATED = "unauthenticated" // no valid credentials (missing, malformed, unknown or revoked key)
	EFORBIDDEN       = "forbidden"       // the caller is known but its roles do not allow this
	ERATELIMITED     = "rate_limited"    // the caller's key sent more requests than its rate limit; retry later
	EINTERNAL        = "internal"        // a bug or an unexpected failure; details are logged, not shown
)

// ErrIntegrity marks an internal error whose cause is stored data that
// fails its hash: a record, receipt or request envelope changed behind
// writ's back. Unlike other internal errors, its message (which names the
// record and the hashes expected and found, all of the caller's own
// tenant) is shown to the caller: the person about to act on the data
// must learn that it was tampered with, not that something failed.
var ErrIntegrity = errors.New("stored data fails its integrity check")

// Error is an application error: a code from the list above, a message
// safe to show to the caller, and optional details naming where the
// problem is (a field path, or a file and line of a pack).
type Error struct {
	Code    string
	Message string
	Details []Detail
	// Err is the underlying cause, if any. It is for logs and errors.Is;
	// it is never shown to callers.
	Err error
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Detail locates one problem.
type Detail struct {
	// Field is a JSON path into the input (for example "evidence[0].kind").
	Field string `json:"field,omitempty"`
	// File and Line locate the problem in a pack file.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
}

func (e *Error) Error() string {
	msg := e.Message
	for _, d := range e.Details {
		msg += "\n  " + d.String()
	}
	return msg
}

// String renders a detail as "file:line: message" or "field: message".
func (d Detail) String() string {
	switch {
	case d.File != "" && d.Line > 0:
		return fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Message)
	case d.File != "":
		return fmt.Sprintf("%s: %s", d.File, d.Message)
	case d.Field != "":
		return fmt.Sprintf("%s: %s", d.Field, d.Message)
	}
	return d.Message
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of an application error, or EINTERNAL for
// any other non-nil error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of an application error, or "internal
// error" for any other error: internal details are never shown to callers.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrorDetails returns the details of an application error, if any.
func ErrorDetails(err error) []Detail {
	var e *Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}
