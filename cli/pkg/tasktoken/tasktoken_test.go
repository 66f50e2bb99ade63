package tasktoken_test

import (
	"regexp"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/tasktoken"
)

// TestValidAndPatternAgree: every string Valid accepts, Pattern matches whole, and the shapes
// around it (short, long, upper case, another prefix) are neither.
func TestValidAndPatternAgree(t *testing.T) {
	whole := regexp.MustCompile("^" + tasktoken.Pattern + "$")
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{tasktoken.Prefix + hex, true},
		{tasktoken.Prefix + hex[:63], false},
		{tasktoken.Prefix + hex + "0", false},
		{tasktoken.Prefix + strings.ToUpper(hex), false},
		{"tatarb_" + hex, false},
		{"", false},
	} {
		if got := tasktoken.Valid(tc.s); got != tc.want {
			t.Errorf("Valid(%q) = %t, want %t", tc.s, got, tc.want)
		}
		if got := whole.MatchString(tc.s); got != tc.want {
			t.Errorf("Pattern matches %q: %t, want %t", tc.s, got, tc.want)
		}
	}
}
