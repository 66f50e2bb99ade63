// Package token mints, hashes and reads the per-Task API tokens: the controller mints one
// into each Task's Secret, the cache indexes those Secrets by the token's hash, and the REST
// API hashes the bearer token a caller presents to find its Task in that index. Tokens are
// never index keys in clear.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Size is the number of random bytes in a token; New hex-encodes them (2*Size characters).
const Size = 32

// New mints a token: Size random bytes, hex encoded.
func New() (string, error) {
	b := make([]byte, Size)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to read random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Hash is the hex SHA-256 of a token: the key the token Secrets are indexed by.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// FromAuthorization reads the token of an "Authorization: Bearer <token>" header value,
// without surrounding white space; ok is false when there is no bearer token.
func FromAuthorization(header string) (token string, ok bool) {
	rest, ok := strings.CutPrefix(header, "Bearer ")
	token = strings.TrimSpace(rest)
	if !ok || token == "" {
		return "", false
	}
	return token, true
}
