package taskops

import "fmt"

// Code is what kind of refusal or failure an Error is. The rest package turns it into the HTTP
// status a client sees (one function, rest's statusOf); taskops knows nothing of HTTP.
type Code int

const (
	// Invalid: the request names something that does not hold (a repo the Project lacks, a
	// review's ref, a subtask the API server refuses as invalid).
	Invalid Code = iota + 1
	// Unauthenticated: the caller's token no longer works (its Task ended, was replaced, or its
	// token Secret is not the one the operator minted).
	Unauthenticated
	// Forbidden: the caller may not do this (a kind the subtask policy refuses, another Task's
	// subtask, cancelling a review, a pod that is not a pool pod).
	Forbidden
	// NotFound: what the call names does not exist.
	NotFound
	// Conflict: the Task's state refuses the call (a different change summary, the proposals'
	// maximum, a subtask that already finished).
	Conflict
	// Gone: what the call asks about will never be (a pool pod deleted, or its Task ended).
	Gone
	// LimitReached: a subtask limit (depth, children, the Project's active Tasks).
	LimitReached
	// Unavailable: the call could not be done now and may be retried (contended writes, a lock
	// not taken before the call's deadline).
	Unavailable
	// Internal: the API server failed the operator.
	Internal
)

var codeNames = map[Code]string{
	Invalid: "Invalid", Unauthenticated: "Unauthenticated", Forbidden: "Forbidden", NotFound: "NotFound",
	Conflict: "Conflict", Gone: "Gone", LimitReached: "LimitReached", Unavailable: "Unavailable", Internal: "Internal",
}

func (c Code) String() string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is a decision's refusal or failure: its Code and the message the caller is answered with.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
