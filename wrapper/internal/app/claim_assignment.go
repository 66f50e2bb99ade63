package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/wrapper/internal/transcript"
	"tatara.dev/wrapper/internal/workspace"
)

// In a warm pool's pod the wrapper starts before any Task exists: its Task and directive come
// from the claim assignment (cli/pkg/claim), which the cli sidecar writes before it opens the MCP
// port, so the wrapper reads it once its wait for that port ends.

// Variables of the agent's environment that name its Task: the operator sets them in a cold
// pod's wrapper env (wrapperEnv); in a pool pod the claim gives their values.
const (
	envTask       = "TATARA_TASK"
	envDirective  = "TATARA_DIRECTIVE"
	envPushBranch = "TATARA_PUSH_BRANCH"
)

// gitSetupTimeout bounds the checkout's preparation: three local git commands.
const gitSetupTimeout = time.Minute

// maxGitStderr bounds how much of git's stderr an error quotes.
const maxGitStderr = 1024

// applyClaim returns cfg and environ for the Task that claimed the pod: its task, directive and
// working directory (the checkout, when it has one), and the agent environment a cold pod's
// wrapper would have had for it.
func applyClaim(cfg Config, environ []string, a claim.Assignment) (Config, []string) {
	cfg.Task, cfg.Directive = a.Task, a.Directive
	if a.RepoDir != "" {
		cfg.WorkDir = a.RepoDir
	}
	claimed := []string{envTask + "=" + a.Task, envDirective + "=" + a.Directive}
	if a.PushBranch != "" {
		claimed = append(claimed, envPushBranch+"="+a.PushBranch)
	}
	env := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == envTask || name == envDirective || name == envPushBranch
	})
	return cfg, append(env, claimed...)
}

// prepareCheckout does to the pool pod's checkout what workspace-init does to a cold pod's after
// the clone (workspace.Prepare): the Task's ref when it is not the pool's (fetched through the git
// gateway, which now knows the Task), the Task's git identity, and the local branch the agent
// starts on, named after the branch the git gateway lets it push. The pool pod's workspace-init
// cloned before any Task existed, so it could do none of these. A failed fetch is a
// *workspace.Error, the Task's workspace failure; any other error is the wrapper's.
func prepareCheckout(ctx context.Context, a claim.Assignment, log *slog.Logger) error {
	if a.RepoDir == "" {
		return nil
	}
	if a.Ref != "" {
		if err := workspace.FetchRef(ctx, a.RepoDir, a.Ref, int(a.Depth), time.Duration(a.TimeoutSeconds)*time.Second, log); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, gitSetupTimeout)
	defer cancel()
	var cmds [][]string
	for _, kv := range [][2]string{{"user.name", a.AuthorName}, {"user.email", a.AuthorEmail}} {
		if kv[1] != "" {
			cmds = append(cmds, []string{"config", kv[0], kv[1]})
		}
	}
	if a.PushBranch != "" {
		cmds = append(cmds, []string{"switch", "-q", "-c", a.PushBranch})
	}
	for _, args := range cmds {
		if err := runGit(ctx, a.RepoDir, args...); err != nil {
			return err
		}
	}
	return nil
}

// runGit runs git in dir with no system or global config (as workspace-init does), so nothing
// outside the checkout changes what these commands do.
func runGit(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxGitStderr {
			msg = msg[:maxGitStderr] + "..."
		}
		return fmt.Errorf("failed to prepare the checkout %s for the claimed task: git %s: %w: %s", dir, strings.Join(args, " "), err, msg)
	}
	return nil
}

// lateHeart is the /healthz view of a tailer made after the metrics server starts: the tailer
// logs with the Task's name, which a pool pod learns only when claimed. Until it is set, it is a
// tailer not running, which is healthy.
type lateHeart struct {
	t atomic.Pointer[transcript.Tailer]
}

func (h *lateHeart) Heartbeat() time.Time {
	if t := h.t.Load(); t != nil {
		return t.Heartbeat()
	}
	return time.Now()
}

func (h *lateHeart) Running() bool {
	t := h.t.Load()
	return t != nil && t.Running()
}
