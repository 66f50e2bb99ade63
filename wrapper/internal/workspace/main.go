package workspace

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ws "tatara.dev/cli/pkg/workspace"
	"tatara.dev/wrapper/internal/install"
)

// Exit codes of workspace-init.
const (
	ExitFailed = 1 // the workspace could not be prepared; the termination message says why
	ExitUsage  = 2 // bad flags
)

// DefaultTerminationLog is where the kubelet reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// Main is `wrapper workspace-init`: it prepares the workspace and, on failure, writes the
// classified reason to the termination log for the operator, logs it, and exits ExitFailed.
func Main(args []string, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With(slog.String("step", "workspace-init"))
	fs := flag.NewFlagSet("workspace-init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o Options
	var terminationLog, installTo string
	fs.StringVar(&o.URL, "url", "", "repository clone URL (required)")
	fs.StringVar(&o.Ref, "ref", "", "branch, tag or full commit id (default: the remote's default branch)")
	fs.IntVar(&o.Depth, "depth", 1, "commits to fetch; 0 fetches the whole history")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "bound on the whole preparation")
	fs.DurationVar(&o.UnreachableRetryFor, "unreachable-retry-for", DefaultUnreachableRetryFor,
		"how long a repository host that cannot be reached is tried again (0: once)")
	fs.StringVar(&o.Dir, "dir", "/workspace", "directory to clone into (must be empty)")
	fs.StringVar(&o.CredentialsDir, "credentials-dir", "", "mounted credentials Secret (empty: anonymous)")
	fs.StringVar(&o.CredentialsSecret, "credentials-secret", "", "the credentials Secret's name, for messages")
	fs.StringVar(&o.ScratchDir, "scratch-dir", os.TempDir(), "private directory for git's HOME and the ssh key copy")
	fs.StringVar(&o.PushURL, "push-url", "", "origin's URL after the clone (the pod's git gateway)")
	fs.StringVar(&o.Branch, "branch", "", "local branch to create for the agent's work (with --push-url)")
	fs.StringVar(&o.AuthorName, "author-name", "", "user.name of the clone")
	fs.StringVar(&o.AuthorEmail, "author-email", "", "user.email of the clone")
	fs.StringVar(&terminationLog, "termination-log", DefaultTerminationLog, "file the failure reason is written to")
	fs.StringVar(&installTo, "install-to", "", "first copy this executable there, for the agent image's container to run (empty: no copy)")
	if err := fs.Parse(args); err != nil {
		log.Error("invalid flags", slog.Any("error", err))
		return ExitUsage
	}
	if fs.NArg() > 0 {
		log.Error("invalid flags", slog.String("unexpected_argument", fs.Arg(0)))
		return ExitUsage
	}
	self, err := os.Executable()
	if err != nil {
		log.Error("failed to find this executable (the git credential helper)", slog.Any("error", err))
		return ExitUsage
	}
	o.Self = self

	if installTo != "" {
		// One init container both installs the wrapper and clones: each more costs a container
		// start and the kubelet's noticing its exit.
		if err := install.Copy(self, installTo); err != nil {
			ReportFailure(&Error{ws.CloneFailed, "the wrapper could not be installed for the agent: " + err.Error()}, terminationLog, log)
			return ExitFailed
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = Prepare(ctx, o, log)
	if err == nil {
		return 0
	}
	ReportFailure(err, terminationLog, log)
	return ExitFailed
}

// ReportFailure logs err's classified reason and writes it to the termination log, where the
// operator reads it.
func ReportFailure(err error, terminationLog string, log *slog.Logger) {
	f := Failure(err)
	log.Error("workspace failed", slog.String("reason", f.Reason), slog.String("message", f.Message))
	if werr := os.WriteFile(terminationLog, f.Encode(), 0o644); werr != nil {
		log.Error("failed to write the termination message", slog.String("path", terminationLog), slog.Any("error", werr))
	}
}

// maxCredentialInput bounds what git may send the credential helper.
const maxCredentialInput = 64 << 10

// CredentialMain is `wrapper git-credential --host H --token-file F [--username-file U] <action>`,
// the git credential helper of workspace-init: for `get` it answers with the token from the file,
// and only for the repository's host over https or http; every other action is ignored, so git
// never stores the credential anywhere.
func CredentialMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("git-credential", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "", "the only host (host[:port]) the credential is given to")
	tokenFile := fs.String("token-file", "", "file holding the token")
	usernameFile := fs.String("username-file", "", "file holding the user name (default "+DefaultUsername+")")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	fail := func(code int, msg ...any) int {
		_, _ = fmt.Fprintln(stderr, append([]any{"git-credential:"}, msg...)...)
		return code
	}
	if *host == "" || *tokenFile == "" || fs.NArg() != 1 {
		return fail(ExitUsage, "usage: git-credential --host H --token-file F [--username-file U] get|store|erase")
	}
	if fs.Arg(0) != "get" {
		return 0
	}
	req, err := readCredentialRequest(io.LimitReader(stdin, maxCredentialInput))
	if err != nil {
		return fail(ExitFailed, err)
	}
	if req["host"] != *host || (req["protocol"] != "https" && req["protocol"] != "http") {
		return 0 // not our repository: git goes on without a credential and fails as AuthFailed
	}
	token, err := readSecretFile(*tokenFile)
	if err != nil {
		return fail(ExitFailed, "failed to read the token:", err)
	}
	user := DefaultUsername
	if *usernameFile != "" {
		if user, err = readSecretFile(*usernameFile); err != nil {
			return fail(ExitFailed, "failed to read the username:", err)
		}
	}
	if strings.ContainsAny(user+token, "\n\x00") {
		return fail(ExitFailed, "the username or token contains a newline or NUL")
	}
	if _, err := fmt.Fprintf(stdout, "username=%s\npassword=%s\n", user, token); err != nil {
		return fail(ExitFailed, "failed to answer git:", err)
	}
	return 0
}

// readCredentialRequest reads git's key=value lines up to a blank line or EOF.
func readCredentialRequest(r io.Reader) (map[string]string, error) {
	req := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("malformed credential line %q", line)
		}
		req[k] = v
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("failed to read the credential request: %w", err)
	}
	return req, nil
}
