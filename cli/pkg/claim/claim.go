// Package claim is the warm pool's handshake: the one place that says, end to end, how a pod built
// before any Task learns the Task that took it. Its contract (paths, the token's audience, the
// Assignment, the Answer, the file) is here; each side's part lives with its side, named for its
// role:
//
//  1. The pool keeps ready pods (operator/internal/controller/pool_controller.go). A pool pod holds
//     no credential and no name of a Task; which of its pods a Task may take is one predicate,
//     agent.Claimable (operator/internal/agent/pool.go).
//  2. The Task takes one (operator/internal/controller/pool_claim.go, claimWarm): it records the
//     attempt, then patches the pod under its resourceVersion to become its controller and stamps
//     AnnotationClaimedAt; of two Tasks that chose the same pod, one wins.
//  3. Meanwhile the pod's cli sidecar asks the operator (cli/internal/cli/claim_wait.go): GET
//     OperatorPath with a ServiceAccount token the kubelet projected for this pod alone
//     (Audience), a long poll of up to MaxWait at a time.
//  4. The operator answers it (the claim endpoint, operator/internal/rest/claim.go): the API server
//     reviews the token, which names its pod; once a Task has claimed that pod
//     (operator/internal/taskops/claim.go decides), the Answer (the Assignment and the Task's
//     token) goes to it, and to no other pod.
//  5. The cli keeps the token to itself, writes the Assignment (no secret in it) to File for the
//     wrapper and the git gateway, and only then listens for MCP.
//  6. The wrapper, waiting for that port, reads File (wrapper/internal/app/claim_assignment.go)
//     and starts the agent for that Task.
package claim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	// OperatorPath is where a pool pod's cli asks for its claim: GET with "Authorization: Bearer
	// <the projected token>" and ?wait=<seconds>. The operator answers 200 with an Answer once the
	// pod is claimed, 204 when it is still unclaimed after the wait, 410 when the pod will never
	// be claimed (it is being deleted, or its Task ended), 401/403 for a token that is not a live
	// pool pod's.
	OperatorPath = "/api/v1/claim"
	// WaitParam is the query parameter of the wait; MaxWait bounds it (a longer one is cut to
	// it), well inside the REST API's 25 s handler timeout.
	WaitParam = "wait"
	MaxWait   = 20 * time.Second

	// Audience is the audience of the pod-bound ServiceAccount token: the operator accepts no
	// other, so the pod's token for anything else cannot claim.
	Audience = "tatara.dev/claim"
	// ServiceAccountTokenDir is where that token is mounted, in the cli container only.
	ServiceAccountTokenDir  = "/var/run/tatara/claim-token"
	ServiceAccountTokenFile = "token"

	// Dir is the pod's claim directory: an emptyDir the cli writes and the wrapper and the git
	// gateway mount read-only. File is the Assignment in it.
	Dir  = "/var/run/tatara/claim"
	File = Dir + "/assignment.json"
	// EnvFile names File to each container of a pool pod; its presence is what makes a container
	// wait for the claim.
	EnvFile = "TATARA_CLAIM_FILE"
	// EnvOperatorTokenFile names the projected token's path to the cli.
	EnvOperatorTokenFile = "TATARA_CLAIM_TOKEN_FILE"

	// maxFileBytes bounds File when it is read: the directive is its largest field.
	maxFileBytes = 1 << 20
)

// Assignment is what names the claiming Task inside the pod: everything the operator would have
// put into a cold pod's env, except the token.
type Assignment struct {
	Project   string `json:"project"`
	Task      string `json:"task"`
	Kind      string `json:"kind"`
	Directive string `json:"directive"`
	// RepoDir is the checkout the agent works in ("" for a Task without a repo).
	RepoDir string `json:"repoDir,omitempty"`
	// PushBranch is the only branch the gateway lets the agent push to ("" without push).
	PushBranch string `json:"pushBranch,omitempty"`
	// Ref, when set, is the branch, tag or commit id the Task asked for, which is not the pool's
	// checkout: before the agent starts, the wrapper fetches it into RepoDir through the pod's git
	// gateway (which holds the credential; hence a Ref needs a PushBranch), Depth commits deep (0:
	// the whole history), within TimeoutSeconds (the Project's clone timeout), and checks it out.
	Ref            string `json:"ref,omitempty"`
	Depth          int32  `json:"depth,omitempty"`
	TimeoutSeconds int32  `json:"timeoutSeconds,omitempty"`
	// AuthorName and AuthorEmail are the agent's git identity in the checkout.
	AuthorName  string `json:"authorName,omitempty"`
	AuthorEmail string `json:"authorEmail,omitempty"`
}

// Answer is the operator's answer to a claimed pod: the Assignment and the Task's token.
type Answer struct {
	Assignment
	Token string `json:"token"`
	// ClaimedAt is when the Task claimed the pod (the operator's clock), so the pod can tell how
	// long its start took from there.
	ClaimedAt time.Time `json:"claimedAt,omitzero"`
}

// AnnotationClaimedAt records on a claimed pod when its claim was made (RFC 3339, nanoseconds).
const AnnotationClaimedAt = "tatara.dev/claimed-at"

// Validate names the first field a usable Assignment lacks.
func (a Assignment) Validate() error {
	for _, f := range []struct{ name, value string }{{"project", a.Project}, {"task", a.Task}, {"kind", a.Kind}, {"directive", a.Directive}} {
		if f.value == "" {
			return fmt.Errorf("claim assignment has no %s", f.name)
		}
	}
	if a.PushBranch != "" && a.RepoDir == "" {
		return errors.New("claim assignment has a push branch but no repo dir")
	}
	switch {
	case a.Ref != "" && a.PushBranch == "":
		return fmt.Errorf("claim assignment names ref %q but no push branch: only the git gateway can fetch it", a.Ref)
	case strings.HasPrefix(a.Ref, "-"):
		return fmt.Errorf("claim assignment's ref %q starts with '-'", a.Ref)
	case a.Depth < 0:
		return fmt.Errorf("claim assignment's depth %d is negative", a.Depth)
	case a.Ref != "" && a.TimeoutSeconds <= 0:
		return fmt.Errorf("claim assignment names ref %q but no positive timeout (%d s)", a.Ref, a.TimeoutSeconds)
	}
	return nil
}

// WriteFile writes a to path atomically (a temporary file renamed into place), so a reader sees
// either no file or the whole assignment.
func WriteFile(path string, a Assignment) error {
	if err := a.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("failed to encode claim assignment: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".assignment-*")
	if err != nil {
		return fmt.Errorf("failed to write claim assignment: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("failed to write claim assignment %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o444); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("failed to write claim assignment %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write claim assignment %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to write claim assignment %s: %w", path, err)
	}
	return nil
}

// ErrNotClaimed is ReadFile's error while the pod is unclaimed (no file yet).
var ErrNotClaimed = errors.New("the pod is not claimed yet")

// ReadFile reads the assignment at path; ErrNotClaimed when there is none yet.
func ReadFile(path string) (Assignment, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Assignment{}, ErrNotClaimed
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("failed to read claim assignment: %w", err)
	}
	defer func() { _ = f.Close() }()
	var a Assignment
	dec := json.NewDecoder(&limitedReader{f, maxFileBytes})
	if err := dec.Decode(&a); err != nil {
		return Assignment{}, fmt.Errorf("failed to read claim assignment %s (at most %d bytes of JSON): %w", path, maxFileBytes, err)
	}
	if err := a.Validate(); err != nil {
		return Assignment{}, fmt.Errorf("invalid claim assignment %s: %w", path, err)
	}
	return a, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("file too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}
