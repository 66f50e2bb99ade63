// Package token mints, hashes and reads the per-Task API tokens: the controller mints one
// into each Task's Secret and records its hash in the Task status (status.tokenHash), and the
// REST API hashes the bearer token a caller presents to find its Task by that hash. Tokens are
// never index keys in clear.
//
// A token's shape (tatara_<64 hex>) is defined once, in tatara.dev/cli/pkg/tasktoken: the shape
// alone lets the cli's and the wrapper's log redaction (tatara.dev/cli/pkg/redact) mask a token
// without knowing its value.
//
// A token's life, and the one place that moves each step:
//   - minted: ensureSecret in controller/task_controller.go, with New; the Secret is
//     agent.BuildSecret (agent/names.go), controlled by the Task, and ensureSecret sets its Hash
//     as status.tokenHash, written before any pod exists (the persist step of startAttempt in
//     controller/attempts.go);
//   - delivered, only to the pod's cli: a secretKeyRef in the cli's env (agent/env.go) for a pod
//     of the Task's own; the claim's answer for a warm pool pod (api/claim.go);
//   - checked on every REST call: taskOfToken and mintedToken in api/auth.go (the hash finds the
//     Task through the cache index in the index package; the Secret must be the minted one);
//   - derived, never shared, for the memory and chat backends (tasktoken.ForAudience), which
//     review what they get at api/tokenreview.go;
//   - ended: refused once the Task is cancelled or finished (endedTask in api/auth.go), its Secret
//     then deleted by the Task's reconcile (deleteSecret in controller/task_controller.go); replaced when a lost pod is retried
//     (attemptLost in controller/attempts.go clears the hash, and the retry mints anew); gone with
//     the Task (owner references).
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"tatara.dev/cli/pkg/tasktoken"
)

// The token's shape (see tasktoken).
const (
	Size   = tasktoken.Size
	Prefix = tasktoken.Prefix
	Len    = tasktoken.Len
)

// New mints a token: Prefix and Size random bytes, hex encoded.
func New() (string, error) {
	b := make([]byte, Size)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to read random token: %w", err)
	}
	return Prefix + hex.EncodeToString(b), nil
}

// Valid reports whether s has the shape of a token New mints.
func Valid(s string) bool { return tasktoken.Valid(s) }

// Hash is the hex SHA-256 of a token: the value recorded in the Task's status.tokenHash.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Matches reports, in constant time, whether token hashes to hash (a status.tokenHash). An
// empty hash matches nothing.
func Matches(token, hash string) bool {
	if hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(Hash(token)), []byte(hash)) == 1
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
