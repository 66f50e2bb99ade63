package rest

import (
	"net/http"
	"regexp"
)

// IdempotencyKeyHeader names a tool call that creates something, so the cli may send it again
// after a connection lost mid-call or a 503 (an operator rollout) without creating it twice. A
// call whose key was already recorded for the Task answers as the first one did and changes
// nothing: activity entries and proposals keep their call's key (status.activity[].requestID,
// status.proposals[].requestID), a subtask keeps it in its annotation
// taskops.SubtaskRequestAnnotation. State lives in the Task objects, so a retry that reaches
// another replica is recognised too. This file reads the header; taskops gets the key as the
// call's request id.
const IdempotencyKeyHeader = "Idempotency-Key"

// idempotencyKeyPattern bounds a key to what a status field and an annotation can hold.
var idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID is the call's Idempotency-Key, "" when it sent none.
func requestID(r *http.Request) (string, *apiError) {
	values := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", errorf(http.StatusBadRequest, "header %s: sent %d times, want at most once", IdempotencyKeyHeader, len(values))
	case !idempotencyKeyPattern.MatchString(values[0]):
		return "", errorf(http.StatusBadRequest, "header %s: want 1 to 64 of A-Z a-z 0-9 . _ -, got %d bytes", IdempotencyKeyHeader, len(values[0]))
	}
	return values[0], nil
}
