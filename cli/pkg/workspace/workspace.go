// Package workspace is the contract between the agent pod's workspace-init container, which clones
// the Task's repository, and the operator, which reads the outcome from the container's termination
// message: the failure reasons and the message's format. A claimed warm-pool pod whose Task asks
// for another ref than the pool's checkout fetches it in the wrapper container instead; a failure
// there ends the wrapper with ExitCheckoutFailed and the same termination message.
package workspace

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ExitCheckoutFailed is the wrapper's exit code when a claimed pool pod could not fetch or check
// out its Task's ref, before the agent started; the wrapper's termination message is a Failure.
// The agent shares the wrapper's container: the wrapper exits 1 when the agent exits with this
// code, and empties the message once the agent has run. The operator still takes only the Reason
// from the wrapper's message, never its text.
const ExitCheckoutFailed = 5

// Reasons a workspace could not be prepared; each becomes the reason of the Task's WorkspaceFailed
// condition.
const (
	// RepoNotFound: the remote answered that the repository does not exist (HTTP 404, "not found",
	// "does not appear to be a git repository").
	RepoNotFound = "RepoNotFound"
	// AuthFailed: the remote refused the credential, or asked for one and none was configured.
	AuthFailed = "AuthFailed"
	// RefNotFound: the repository exists but has no such branch, tag or commit.
	RefNotFound = "RefNotFound"
	// Timeout: the clone did not finish within the Project's workspace.timeoutSeconds.
	Timeout = "Timeout"
	// Unreachable: the host did not resolve or refused the connection.
	Unreachable = "Unreachable"
	// HostKeyUnknown: ssh refused the host, whose key is not in the Secret's known_hosts.
	HostKeyUnknown = "HostKeyUnknown"
	// CredentialsInvalid: the referenced Secret is missing or lacks a key the URL's scheme needs.
	CredentialsInvalid = "CredentialsInvalid"
	// GitUnavailable: the container's image has no git.
	GitUnavailable = "GitUnavailable"
	// CloneFailed: any other failure; the message has git's (masked) stderr.
	CloneFailed = "CloneFailed"
)

// Reasons lists every reason, for tests and documentation.
var Reasons = []string{
	RepoNotFound, AuthFailed, RefNotFound, Timeout, Unreachable,
	HostKeyUnknown, CredentialsInvalid, GitUnavailable, CloneFailed,
}

// MaxMessageBytes bounds the termination message: the kubelet keeps at most 4096 bytes of it.
const MaxMessageBytes = 4096

// Failure is what workspace-init writes to its termination message when it fails.
type Failure struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Encode returns the failure as JSON of at most MaxMessageBytes, cutting Message (on a rune
// boundary) when it is longer.
func (f Failure) Encode() []byte {
	for {
		b, _ := json.Marshal(f) // a struct of two strings always marshals
		if len(b) <= MaxMessageBytes || f.Message == "" {
			return b
		}
		// Shrink in proportion: JSON escapes make some bytes longer encoded than raw.
		cut := len(f.Message)*MaxMessageBytes/len(b) - 3
		for cut > 0 && !utf8.RuneStart(f.Message[cut]) {
			cut--
		}
		if cut <= 0 {
			f.Message = ""
			continue
		}
		f.Message = strings.TrimSuffix(f.Message[:cut], "...") + "..."
	}
}

// ParseFailure reads a termination message written by Encode. A message that is not such JSON, or
// names an unknown reason, is returned as CloneFailed with the raw text, so nothing is lost.
func ParseFailure(msg string) Failure {
	var f Failure
	if err := json.Unmarshal([]byte(msg), &f); err != nil || !slices.Contains(Reasons, f.Reason) {
		return Failure{Reason: CloneFailed, Message: fmt.Sprintf("unrecognised termination message: %q", msg)}
	}
	return f
}
