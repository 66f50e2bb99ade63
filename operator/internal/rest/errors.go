package rest

import (
	"fmt"
	"net/http"

	"tatara.dev/operator/internal/taskops"
)

// apiError is an error with the HTTP status it maps to; its message names what was wrong.
type apiError struct {
	status int
	msg    string
	// retryAfter is a 429's Retry-After value, in whole seconds, where the answer sets it.
	retryAfter string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// fromOps is the answer to a decision's error: its message, with the status of its Code; nil for
// nil.
func fromOps(err *taskops.Error) *apiError {
	if err == nil {
		return nil
	}
	return &apiError{status: statusOf(err.Code), msg: err.Message}
}

// statusOf is the HTTP status of each taskops.Code, the one place that maps them.
func statusOf(code taskops.Code) int {
	switch code {
	case taskops.Invalid:
		return http.StatusBadRequest
	case taskops.Unauthenticated:
		return http.StatusUnauthorized
	case taskops.Forbidden:
		return http.StatusForbidden
	case taskops.NotFound:
		return http.StatusNotFound
	case taskops.Conflict:
		return http.StatusConflict
	case taskops.Gone:
		return http.StatusGone
	case taskops.LimitReached:
		return http.StatusTooManyRequests
	case taskops.Unavailable:
		return http.StatusServiceUnavailable
	default: // taskops.Internal, and a Code this build does not know
		return http.StatusInternalServerError
	}
}
