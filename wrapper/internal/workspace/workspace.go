// Package workspace is the agent pod's workspace-init step: it clones the Task's repository into
// /workspace before the agent starts, with a credential only this step can read, and classifies a
// failure (RepoNotFound, AuthFailed, RefNotFound, Timeout, ...) from git's exit and stderr so the
// operator can give the Task a WorkspaceFailed condition instead of an agent in an empty directory.
package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/redact"
	ws "tatara.dev/cli/pkg/workspace"
)

// Keys of the credentials Secret, as mounted files.
const (
	TokenKey      = "token"
	UsernameKey   = "username"
	SSHKeyKey     = "ssh-privatekey" // the key of Secrets of type kubernetes.io/ssh-auth
	KnownHostsKey = "known_hosts"

	// DefaultUsername is the HTTP Basic user sent with a token when the Secret names none; GitHub,
	// GitLab and Gitea accept any user with a token, and this one says what it is.
	DefaultUsername = "x-access-token"
)

// DefaultUnreachableRetryFor covers the cluster's DNS and Services coming back, after a node that
// was lost (the Task's retry starts the moment the node is Ready, before CoreDNS is) or a CoreDNS
// rollout, while a host that does not exist still fails within a minute.
const DefaultUnreachableRetryFor = time.Minute

// maxStderr bounds how much of git's stderr is kept for the failure message (the tail: git's
// fatal line is last).
const maxStderr = 2048

// Options say what to clone and how.
type Options struct {
	// URL is the repository's clone URL: http(s), ssh:// or user@host:path.
	URL string
	// Ref is a branch, tag or full commit id; empty means the remote's default branch.
	Ref string
	// Depth is the number of commits fetched; 0 fetches everything.
	Depth int
	// Timeout bounds the whole preparation.
	Timeout time.Duration
	// UnreachableRetryFor is how long a clone (or a commit's fetch) whose host cannot be reached
	// (no DNS answer, refused, no route) is tried again, inside Timeout; 0 tries once. The
	// workspace-init command uses DefaultUnreachableRetryFor.
	UnreachableRetryFor time.Duration
	// Dir is the (empty) directory to clone into.
	Dir string
	// CredentialsDir holds the mounted credentials Secret; empty means an anonymous clone.
	CredentialsDir string
	// CredentialsSecret is the Secret's name, for messages.
	CredentialsSecret string
	// ScratchDir is a directory only this step can see: git's HOME and the ssh key's copy.
	ScratchDir string
	// PushURL, when set, becomes origin's URL afterwards (the pod's git gateway), and Branch the
	// local branch the agent starts on.
	PushURL, Branch string
	// AuthorName and AuthorEmail are the clone's user.name and user.email.
	AuthorName, AuthorEmail string
	// Git is the git binary; empty means git from PATH.
	Git string
	// Self is this executable, which git runs as its credential helper (`<Self> git-credential`).
	Self string
}

// Error is a classified failure.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Failure is the termination message form of err: its reason when classified, else CloneFailed.
func Failure(err error) ws.Failure {
	var we *Error
	if errors.As(err, &we) {
		return ws.Failure{Reason: we.Reason, Message: we.Message}
	}
	return ws.Failure{Reason: ws.CloneFailed, Message: err.Error()}
}

var (
	commitID = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	// scpLike is git's user@host:path form (no scheme, a colon before the first slash).
	scpLike = regexp.MustCompile(`^[^/:]+:`)
)

// IsSSH reports whether git would reach rawURL over ssh.
func IsSSH(rawURL string) bool {
	if strings.HasPrefix(rawURL, "ssh://") || strings.HasPrefix(rawURL, "git+ssh://") {
		return true
	}
	return !strings.Contains(rawURL, "://") && scpLike.MatchString(rawURL)
}

// Prepare clones the repository into opts.Dir. Its error is an *Error naming the reason.
func Prepare(ctx context.Context, opts Options, log *slog.Logger) error {
	start := time.Now()
	if err := validate(opts); err != nil {
		return err
	}
	git := opts.Git
	if git == "" {
		git = "git"
	}
	gitPath, err := exec.LookPath(git)
	if err != nil {
		return &Error{ws.GitUnavailable, fmt.Sprintf("git is not in this image: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	env, secret, cleanup, err := credentialEnv(opts)
	if err != nil {
		return err
	}
	defer cleanup()
	r := &runner{git: gitPath, env: env, red: redact.New(secret), timeout: opts.Timeout}

	if commitID.MatchString(opts.Ref) {
		// A commit is fetched by id (servers allow it for reachable commits since git 2.5).
		err = r.run(ctx, "", "init", "-q", "--", opts.Dir)
		if err == nil {
			err = r.run(ctx, opts.Dir, "remote", "add", "origin", opts.URL)
		}
		if err == nil {
			err = retryUnreachable(ctx, opts.UnreachableRetryFor, log, func() error {
				return r.run(ctx, opts.Dir, append(append([]string{"fetch", "-q"}, depthArgs(opts.Depth)...), "origin", opts.Ref)...)
			})
		}
		if err == nil {
			err = r.run(ctx, opts.Dir, "checkout", "-q", "--detach", "FETCH_HEAD")
		}
	} else {
		args := append([]string{"clone", "-q"}, depthArgs(opts.Depth)...)
		if opts.Ref != "" {
			args = append(args, "--branch", opts.Ref)
		}
		// A failed clone removes the directory it created, so a retry starts clean.
		err = retryUnreachable(ctx, opts.UnreachableRetryFor, log, func() error {
			return r.run(ctx, "", append(args, "--", opts.URL, opts.Dir)...)
		})
	}
	if err != nil {
		return err
	}
	cloned := time.Since(start)

	for _, kv := range [][2]string{{"user.name", opts.AuthorName}, {"user.email", opts.AuthorEmail}} {
		if kv[1] != "" {
			if err := r.run(ctx, opts.Dir, "config", kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	if opts.PushURL != "" {
		if err := r.run(ctx, opts.Dir, "remote", "set-url", "origin", opts.PushURL); err != nil {
			return err
		}
		if opts.Branch != "" {
			if err := r.run(ctx, opts.Dir, "switch", "-q", "-c", opts.Branch); err != nil {
				return err
			}
		}
	}
	head, err := r.output(ctx, opts.Dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	log.Info("workspace ready", slog.String("dir", opts.Dir), slog.String("url", opts.URL),
		slog.String("ref", opts.Ref), slog.Int("depth", opts.Depth), slog.String("head", head),
		slog.String("branch", opts.Branch), slog.Bool("push_gateway", opts.PushURL != ""),
		slog.Float64("clone_seconds", cloned.Seconds()), slog.Float64("total_seconds", time.Since(start).Seconds()))
	return nil
}

// retryUnreachable runs step until it succeeds, fails for another reason than an unreachable host,
// or the next try would start after window (or ctx ends), waiting 1 s, then twice as long each
// time, at most 10 s. Each retry is logged with the error that caused it.
func retryUnreachable(ctx context.Context, window time.Duration, log *slog.Logger, step func() error) error {
	deadline := time.Now().Add(window)
	wait := time.Second
	for {
		err := step()
		var we *Error
		if err == nil || !errors.As(err, &we) || we.Reason != ws.Unreachable || time.Now().Add(wait).After(deadline) {
			return err
		}
		log.Warn("repository host unreachable, trying again", slog.Float64("in_seconds", wait.Seconds()), slog.String("error", we.Message))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

func validate(opts Options) error {
	switch {
	case opts.URL == "":
		return &Error{ws.CloneFailed, "no repository URL"}
	case strings.HasPrefix(opts.URL, "-"):
		return &Error{ws.CloneFailed, fmt.Sprintf("repository URL %q starts with '-'", opts.URL)}
	case strings.HasPrefix(opts.Ref, "-"):
		return &Error{ws.RefNotFound, fmt.Sprintf("ref %q starts with '-'", opts.Ref)}
	case opts.Dir == "" || opts.ScratchDir == "":
		return &Error{ws.CloneFailed, "the workspace and scratch directories must be set"}
	case opts.Depth < 0:
		return &Error{ws.CloneFailed, fmt.Sprintf("depth %d is negative", opts.Depth)}
	case opts.Timeout <= 0:
		return &Error{ws.CloneFailed, fmt.Sprintf("timeout %s is not positive", opts.Timeout)}
	}
	if u, err := url.Parse(opts.URL); err == nil && u.User != nil && !IsSSH(opts.URL) {
		// A credential in the URL would land in .git/config, which the agent reads.
		return &Error{ws.CredentialsInvalid, "the repository URL carries user info; reference a credentials Secret instead"}
	}
	return nil
}

func depthArgs(depth int) []string {
	if depth == 0 {
		return nil
	}
	return []string{"--depth", strconv.Itoa(depth)}
}

// credentialEnv is git's environment: no system or global config, no prompts, the C locale (the
// classifier reads English messages), HOME in the scratch dir, and the credential: a credential
// helper (this executable) reading the token file for http(s), or an ssh command with a private
// copy of the key and strict host key checking for ssh. It returns the secret for masking and a
// cleanup that removes the key's copy.
func credentialEnv(opts Options) (env []string, secret string, cleanup func(), err error) {
	cleanup = func() {}
	env = baseGitEnv(opts.ScratchDir)
	if opts.CredentialsDir == "" {
		return env, "", cleanup, nil
	}
	missing := func(key string) error {
		return &Error{ws.CredentialsInvalid, fmt.Sprintf("credentials Secret %q has no key %q (or does not exist)", opts.CredentialsSecret, key)}
	}
	if IsSSH(opts.URL) {
		key, err := os.ReadFile(filepath.Join(opts.CredentialsDir, SSHKeyKey))
		if err != nil {
			return nil, "", cleanup, missing(SSHKeyKey)
		}
		knownHosts := filepath.Join(opts.CredentialsDir, KnownHostsKey)
		if _, err := os.Stat(knownHosts); err != nil {
			return nil, "", cleanup, missing(KnownHostsKey)
		}
		// ssh refuses a key readable by others; the Secret's file is group-readable (fsGroup), so
		// a 0600 copy goes to the scratch dir, removed when the clone is done.
		dir, err := os.MkdirTemp(opts.ScratchDir, "ssh-")
		if err != nil {
			return nil, "", cleanup, &Error{ws.CloneFailed, fmt.Sprintf("failed to create the ssh key's directory: %v", err)}
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		keyPath := filepath.Join(dir, "id")
		if err := os.WriteFile(keyPath, key, 0o600); err != nil {
			cleanup()
			return nil, "", func() {}, &Error{ws.CloneFailed, fmt.Sprintf("failed to copy the ssh key: %v", err)}
		}
		env = append(env, "GIT_SSH_COMMAND=ssh -F /dev/null -i "+shellQuote(keyPath)+
			" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes -o StrictHostKeyChecking=yes"+
			" -o UserKnownHostsFile="+shellQuote(knownHosts)+" -o ConnectTimeout=20"+sshProxyCommand(opts.Self, os.Getenv))
		return env, "", cleanup, nil
	}

	tokenFile := filepath.Join(opts.CredentialsDir, TokenKey)
	token, err := readSecretFile(tokenFile)
	if err != nil {
		return nil, "", cleanup, missing(TokenKey)
	}
	u, err := url.Parse(opts.URL)
	if err != nil || u.Host == "" {
		return nil, "", cleanup, &Error{ws.CloneFailed, fmt.Sprintf("repository URL %q is not a valid http(s) URL", opts.URL)}
	}
	helper := shellQuote(opts.Self) + " git-credential --host " + shellQuote(u.Host) + " --token-file " + shellQuote(tokenFile)
	if _, err := os.Stat(filepath.Join(opts.CredentialsDir, UsernameKey)); err == nil {
		helper += " --username-file " + shellQuote(filepath.Join(opts.CredentialsDir, UsernameKey))
	}
	// The empty helper first resets any inherited list; git runs a helper through the shell.
	env = append(env, "GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=!"+helper)
	return env, token, cleanup, nil
}

// baseGitEnv is the environment of every git command here, credentials aside: no system or global
// config, no prompts, the C locale (the classifier reads English messages), HOME as given.
func baseGitEnv(home string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_VARIANT=ssh",
		// A stalled transfer (under 1 KiB/s for 30 s) fails before the overall timeout.
		"GIT_HTTP_LOW_SPEED_LIMIT=1024",
		"GIT_HTTP_LOW_SPEED_TIME=30",
	}
	// The pod's egress proxy (the Project's spec.egress): git's http(s) goes through it, and ssh
	// through a CONNECT tunnel (sshProxyCommand).
	for _, name := range agentpod.ProxyEnv {
		if v := os.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// FetchRef checks out ref, detached, in the existing clone dir: fetched from its origin, depth
// commits deep (0: the whole history). A claimed warm-pool pod does this when its Task asks for
// another ref than the pool's checkout; there origin is the pod's git gateway, which adds the
// credential, so none is needed here, and git's negotiation sends only what the clone lacks. Its
// error is an *Error naming the reason, as Prepare's.
func FetchRef(ctx context.Context, dir, ref string, depth int, timeout time.Duration, log *slog.Logger) error {
	start := time.Now()
	switch {
	case ref == "" || strings.HasPrefix(ref, "-"):
		return &Error{ws.RefNotFound, fmt.Sprintf("ref %q is empty or starts with '-'", ref)}
	case depth < 0:
		return &Error{ws.CloneFailed, fmt.Sprintf("depth %d is negative", depth)}
	case timeout <= 0:
		return &Error{ws.CloneFailed, fmt.Sprintf("timeout %s is not positive", timeout)}
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return &Error{ws.GitUnavailable, fmt.Sprintf("git is not in this image: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := &runner{git: gitPath, env: baseGitEnv(os.Getenv("HOME")), red: redact.New(), timeout: timeout}
	if err := r.run(ctx, dir, append(append([]string{"fetch", "-q", "--no-tags"}, depthArgs(depth)...), "origin", ref)...); err != nil {
		return err
	}
	if err := r.run(ctx, dir, "checkout", "-q", "--detach", "FETCH_HEAD"); err != nil {
		return err
	}
	head, err := r.output(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	log.Info("workspace ref fetched", slog.String("dir", dir), slog.String("ref", ref), slog.Int("depth", depth),
		slog.String("head", head), slog.Float64("fetch_seconds", time.Since(start).Seconds()))
	return nil
}

// readSecretFile reads a mounted Secret value, without its trailing newline; empty is an error.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

type runner struct {
	git     string
	env     []string
	red     *redact.Redactor
	timeout time.Duration
}

func (r *runner) run(ctx context.Context, dir string, args ...string) error {
	_, err := r.output(ctx, dir, args...)
	return err
}

// output runs git in its own process group, so a timeout kills its helpers (git-remote-https,
// ssh) too, and classifies a failure.
func (r *runner) output(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, r.git, args...)
	cmd.Dir = dir
	cmd.Env = r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return strings.TrimSpace(stdout.String()), nil
	}
	msg := tail(maskURLs(r.red.String(stderr.String())), maxStderr)
	if ctx.Err() != nil {
		return "", &Error{ws.Timeout, fmt.Sprintf("git %s did not finish within %s; stderr: %s", args[0], r.timeout, msg)}
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return "", &Error{ws.GitUnavailable, err.Error()}
	}
	return "", &Error{Classify(stderr.String()), fmt.Sprintf("git %s failed (%v): %s", args[0], err, msg)}
}

// rules map git's (LC_ALL=C) stderr to a reason; the first match wins, so the specific come first.
var rules = []struct {
	reason string
	re     *regexp.Regexp
}{
	{ws.Timeout, regexp.MustCompile(`(?i)operation too slow|timed out`)},
	{ws.HostKeyUnknown, regexp.MustCompile(`Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No \S+ host key is known`)},
	{ws.AuthFailed, regexp.MustCompile(`Authentication failed|could not read (?:Username|Password)|Permission denied \(|returned error: 40[13]\b|HTTP Basic: Access denied|Invalid username or password`)},
	{ws.RepoNotFound, regexp.MustCompile(`(?i)repository '[^']*' not found|does not appear to be a git repository|returned error: 404\b|not found: did you run git update-server-info`)},
	{ws.RefNotFound, regexp.MustCompile(`Remote branch \S+ not found|couldn't find remote ref|not our ref|unadvertised object|reference is not a tree|pathspec '[^']*' did not match`)},
	{ws.Unreachable, regexp.MustCompile(`Could not resolve host|Connection refused|Failed to connect|No route to host|Network is unreachable|Could not resolve hostname`)},
}

// Classify returns the reason git's stderr names, or CloneFailed.
func Classify(stderr string) string {
	for _, r := range rules {
		if r.re.MatchString(stderr) {
			return r.reason
		}
	}
	return ws.CloneFailed
}

var urlUserinfo = regexp.MustCompile(`(://)[^/@\s]+@`)

// maskURLs removes user info from URLs git echoes.
func maskURLs(s string) string { return urlUserinfo.ReplaceAllString(s, "${1}"+redact.Mask+"@") }

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
