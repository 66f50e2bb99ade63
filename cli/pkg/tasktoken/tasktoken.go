// Package tasktoken is the shape of a Task's API token, the one definition the operator mints and
// checks tokens by (operator/internal/token) and the cli's and the wrapper's log redaction masks
// them by (cli/pkg/redact), so a token is masked wherever its value is unknown.
package tasktoken

import "strconv"

const (
	// Prefix starts every token, so a token is recognisable by its shape.
	Prefix = "tatara_"
	// Size is the number of random bytes in a token, hex encoded after Prefix.
	Size = 32
	// Len is the length of a token: Prefix and 2*Size lower-case hex characters.
	Len = len(Prefix) + 2*Size
)

// Pattern is a regular expression for a token anywhere in a text, with Prefix as its first group.
var Pattern = "(" + Prefix + ")[0-9a-f]{" + strconv.Itoa(2*Size) + "}"

// Valid reports whether s is exactly one token.
func Valid(s string) bool {
	if len(s) != Len || s[:len(Prefix)] != Prefix {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
