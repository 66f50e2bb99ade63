package api

import (
	"strings"
	"testing"
)

func TestSubtaskNamePrefix(t *testing.T) {
	tests := []struct{ parent, want string }{
		{"impl", "impl-sub-"},
		{strings.Repeat("a", 50), strings.Repeat("a", 38) + "-sub-"},
		{strings.Repeat("a", 37) + "-b", strings.Repeat("a", 37) + "-sub-"},
	}
	for _, tt := range tests {
		got := subtaskNamePrefix(tt.parent)
		if got != tt.want || len(got)+5 > 50 {
			t.Errorf("subtaskNamePrefix(%q) = %q, want %q (and room for 5 random characters within 50)", tt.parent, got, tt.want)
		}
	}
}
