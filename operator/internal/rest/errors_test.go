package rest

import (
	"net/http"
	"testing"

	"tatara.dev/operator/internal/taskops"
)

// TestStatusOfEveryCode: each taskops.Code answers its one HTTP status, with the decision's
// message unchanged; a Code this build does not know is a 500, and no error is no error.
func TestStatusOfEveryCode(t *testing.T) {
	tests := []struct {
		code taskops.Code
		want int
	}{
		{taskops.Invalid, http.StatusBadRequest},
		{taskops.Unauthenticated, http.StatusUnauthorized},
		{taskops.Forbidden, http.StatusForbidden},
		{taskops.NotFound, http.StatusNotFound},
		{taskops.Conflict, http.StatusConflict},
		{taskops.Gone, http.StatusGone},
		{taskops.LimitReached, http.StatusTooManyRequests},
		{taskops.Unavailable, http.StatusServiceUnavailable},
		{taskops.Internal, http.StatusInternalServerError},
		{taskops.Code(99), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			got := fromOps(&taskops.Error{Code: tt.code, Message: "what was wrong"})
			if got.status != tt.want || got.msg != "what was wrong" {
				t.Fatalf("fromOps(%s) = %d %q, want %d %q", tt.code, got.status, got.msg, tt.want, "what was wrong")
			}
		})
	}
	if got := fromOps(nil); got != nil {
		t.Fatalf("fromOps(nil) = %v, want nil", got)
	}
}
