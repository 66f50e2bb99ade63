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

// TestForAudience: an audience token has a token's shape (redaction masks it), is the same for the
// same Task token and audience, and differs from the Task token, from the other audiences' and
// from another Task's.
func TestForAudience(t *testing.T) {
	const tok = tasktoken.Prefix + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	const other = tasktoken.Prefix + "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
	seen := map[string]string{tok: "the Task token"}
	for _, aud := range tasktoken.Audiences {
		got := tasktoken.ForAudience(tok, aud)
		if !tasktoken.Valid(got) {
			t.Errorf("ForAudience(tok, %q) = %q, not a token's shape", aud, got)
		}
		if again := tasktoken.ForAudience(tok, aud); again != got {
			t.Errorf("ForAudience(tok, %q) is %q, then %q", aud, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("ForAudience(tok, %q) equals %s", aud, prev)
		}
		seen[got] = "audience " + aud
		if o := tasktoken.ForAudience(other, aud); o == got {
			t.Errorf("two Task tokens give the same %q token", aud)
		}
	}
}
