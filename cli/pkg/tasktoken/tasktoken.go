// Package tasktoken is the shape of a Task's API token, the one definition the operator mints and
// checks tokens by (operator/internal/token) and the cli's and the wrapper's log redaction masks
// them by (cli/pkg/redact), so a token is masked wherever its value is unknown. It also derives
// the audience tokens the cli sends to the other backends instead of the Task token.
package tasktoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

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

// Audiences are the backends other than the operator, each sent its own token (ForAudience).
const (
	AudienceMemory = "memory"
	AudienceChat   = "chat"
)

// Audiences lists every audience the operator reviews tokens for.
var Audiences = []string{AudienceMemory, AudienceChat}

// ForAudience is the token a backend other than the operator receives in place of the Task token:
// HMAC-SHA256 of the audience, keyed by the Task token, in a token's shape (so redaction masks it).
// The operator, which keeps the Task token, recomputes it to review it for that audience alone;
// the backend cannot recover the Task token from it, so replaying it to the operator's REST API or
// to another backend gets it nowhere.
func ForAudience(token, audience string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("tatara.dev/token-audience/" + audience))
	return Prefix + hex.EncodeToString(mac.Sum(nil))
}
