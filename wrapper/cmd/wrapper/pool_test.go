package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tatara.dev/cli/pkg/claim"
	ws "tatara.dev/cli/pkg/workspace"
)

// recordingAgent records what the agent was started with (its directory, the checkout's branch
// and git identity, the Task's variables and its prompt, the last argument) into $POOL_TEST_OUT,
// then runs the stand-in agent with the same arguments, so the run goes on as with the real CLI.
const recordingAgent = `#!/bin/sh
for prompt; do :; done
{
	echo "dir=$(pwd -P)"
	echo "branch=$(git branch --show-current 2> /dev/null)"
	echo "head=$(git rev-parse HEAD 2> /dev/null)"
	echo "user.name=$(git config user.name 2> /dev/null)"
	echo "user.email=$(git config user.email 2> /dev/null)"
	echo "TATARA_TASK=$TATARA_TASK"
	echo "TATARA_DIRECTIVE=$TATARA_DIRECTIVE"
	echo "TATARA_PUSH_BRANCH=${TATARA_PUSH_BRANCH-unset}"
	echo "prompt=$prompt"
} > "$POOL_TEST_OUT"
exec "$STANDIN" "$@"
`

// terminationLogName is the pool wrapper's termination log, in its working directory.
const terminationLogName = "termination-log"

// startPoolWrapper starts the wrapper as in a pool pod: no Task, no directive, a claim file
// (not written yet) and an MCP URL where nothing listens yet; the agent is agentCommand.
func startPoolWrapper(t *testing.T, agentCommand, claimFile, mcpURL string, env ...string) *wrapperRun {
	t.Helper()
	wrapper, _ := build(t)
	dir := t.TempDir()
	cmd := exec.Command(wrapper, "--metrics-addr", "127.0.0.1:0", "--poll-interval", "20ms",
		"--termination-log", filepath.Join(dir, terminationLogName))
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"TATARA_PROJECT=proj", "TATARA_TASK_KIND=implement",
		"TATARA_AGENT_COMMAND=" + agentCommand,
		"TATARA_WRAPPER_STATE_DIR=" + t.TempDir(),
		"TATARA_MCP_URL=" + mcpURL,
		claim.EnvFile + "=" + claimFile,
	}, env...)
	return startRun(t, cmd)
}

// newCheckout makes a repository with one commit on main, as a pool pod's workspace-init leaves
// it before any Task exists.
func newCheckout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", dir},
		{"-C", dir, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "-q", "--allow-empty", "-m", "seed"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// clonedCheckout makes a bare repository with main and a branch topic one commit ahead, and a
// clone of main one commit deep whose origin is it, as a pool pod's workspace-init leaves it; it
// returns the clone's dir and topic's commit.
func clonedCheckout(t *testing.T) (dir, topic string) {
	t.Helper()
	src, bare := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "src.git")
	dir = filepath.Join(t.TempDir(), "demo")
	id := []string{"-c", "user.name=seed", "-c", "user.email=seed@example.com"}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		append(append([]string{"-C", src}, id...), "commit", "-q", "--allow-empty", "-m", "seed"),
		{"-C", src, "switch", "-q", "-c", "topic"},
		append(append([]string{"-C", src}, id...), "commit", "-q", "--allow-empty", "-m", "topic"),
		{"-C", src, "switch", "-q", "main"},
		{"clone", "-q", "--bare", src, bare},
		{"clone", "-q", "--depth", "1", "file://" + bare, dir},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", bare, "rev-parse", "topic").Output()
	if err != nil {
		t.Fatal(err)
	}
	return dir, strings.TrimSpace(string(out))
}

// A pool pod's wrapper waits for its MCP server beyond --mcp-wait (the cli opens it only once a
// Task claimed the pod), then reads the claim and starts the agent for the claiming Task: its
// directive as the prompt, its variables in the agent's environment, in its checkout, on the
// branch it may push, with its git identity.
func TestWrapperInAPoolPodRunsTheClaimingTask(t *testing.T) {
	_, standin := build(t)
	tests := []struct {
		name       string
		repo       bool
		pushBranch string
		ref        bool // the Task asks for topic, not the pool's main
	}{
		{name: "checkout with a push branch", repo: true, pushBranch: "tatara/claimed-task-1a2b3c4d"},
		{name: "another ref than the pool's", repo: true, pushBranch: "tatara/claimed-task-1a2b3c4d", ref: true},
		{name: "checkout without push", repo: true},
		{name: "no repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case mostly waits on its stand-in agent
			dir := t.TempDir()
			agentScript := filepath.Join(dir, "agent.sh")
			if err := os.WriteFile(agentScript, []byte(recordingAgent), 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "agent-started-with")
			claimFile := filepath.Join(dir, "assignment.json")
			mcpURL := freedURL(t)
			a := claim.Assignment{Project: "proj", Task: "claimed-task", Kind: "implement", Directive: "say hello from the claim",
				AuthorName: "Tatara Agent", AuthorEmail: "agent@tatara.dev"}
			var topic string
			if tt.repo {
				a.RepoDir = newCheckout(t)
				a.PushBranch = tt.pushBranch
			}
			if tt.ref {
				a.RepoDir, topic = clonedCheckout(t)
				a.Ref, a.Depth, a.TimeoutSeconds = "topic", 1, 60
			}
			r := startPoolWrapper(t, agentScript, claimFile, mcpURL,
				"TATARA_WRAPPER_MCP_WAIT=300ms", "POOL_TEST_OUT="+out, "STANDIN="+standin)
			r.waitLog(t, "metrics server listening")
			// Well past --mcp-wait: a pool pod waits for as long as its claim takes.
			time.Sleep(time.Second)
			select {
			case <-r.done:
				t.Fatalf("the wrapper exited (code %d) while waiting for its claim", r.code)
			default:
			}
			if got := r.find("agent started"); len(got) > 0 {
				t.Fatalf("the agent started before the claim: %v", got)
			}

			// The cli's order: the assignment first, then the MCP port.
			if err := claim.WriteFile(claimFile, a); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", strings.TrimSuffix(strings.TrimPrefix(mcpURL, "http://"), "/mcp"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit code = %d, want 0", code)
			}

			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("the agent recorded nothing: %v", err)
			}
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				got[k] = v
			}
			want := map[string]string{"TATARA_TASK": "claimed-task", "TATARA_DIRECTIVE": a.Directive, "prompt": a.Directive,
				"TATARA_PUSH_BRANCH": "unset"}
			if tt.pushBranch != "" {
				want["TATARA_PUSH_BRANCH"] = tt.pushBranch
			}
			if tt.repo {
				resolved, err := filepath.EvalSymlinks(a.RepoDir)
				if err != nil {
					t.Fatal(err)
				}
				want["dir"], want["branch"], want["user.name"], want["user.email"] = resolved, "main", a.AuthorName, a.AuthorEmail
				if tt.pushBranch != "" {
					want["branch"] = tt.pushBranch
				}
				if tt.ref {
					want["head"] = topic
				}
			} else {
				want["dir"] = r.cmd.Dir
				if resolved, err := filepath.EvalSymlinks(r.cmd.Dir); err == nil {
					want["dir"] = resolved
				}
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("the agent started with %s=%q, want %q", k, got[k], v)
				}
			}

			claimed := r.waitLog(t, "pod claimed")
			if claimed["task"] != "claimed-task" || claimed["project"] != "proj" || claimed["waited"] == nil {
				t.Errorf("pod claimed line = %v", claimed)
			}
			for _, msg := range []string{"agent started", "agent exited"} {
				if l := r.waitLog(t, msg); l["task"] != "claimed-task" {
					t.Errorf("%s line names task %v, want the claimed one", msg, l["task"])
				}
			}
		})
	}
}

// A claimed pod whose Task names a ref its origin lacks ends with workspace.ExitCheckoutFailed
// and the reason in its termination message, without starting the agent.
func TestWrapperInAPoolPodReportsAMissingRef(t *testing.T) {
	_, standin := build(t)
	dir := t.TempDir()
	claimFile := filepath.Join(dir, "assignment.json")
	checkout, _ := clonedCheckout(t)
	a := claim.Assignment{Project: "proj", Task: "claimed-task", Kind: "implement", Directive: "d",
		RepoDir: checkout, PushBranch: "tatara/claimed-task-1a2b3c4d", Ref: "no-such-branch", Depth: 1, TimeoutSeconds: 60}
	if err := claim.WriteFile(claimFile, a); err != nil {
		t.Fatal(err)
	}
	r := startPoolWrapper(t, standin, claimFile, mcpListener(t))
	if code := r.wait(t); code != ws.ExitCheckoutFailed {
		t.Fatalf("exit code = %d, want %d", code, ws.ExitCheckoutFailed)
	}
	raw, err := os.ReadFile(filepath.Join(r.cmd.Dir, terminationLogName))
	if err != nil {
		t.Fatal(err)
	}
	if f := ws.ParseFailure(string(raw)); f.Reason != ws.RefNotFound || !strings.Contains(f.Message, "no-such-branch") {
		t.Errorf("termination message %+v, want RefNotFound naming the ref", f)
	}
	if l := r.waitLog(t, "workspace failed"); l["reason"] != ws.RefNotFound || l["task"] != "claimed-task" {
		t.Errorf("workspace failed line = %v", l)
	}
	if got := r.find("agent started"); len(got) > 0 {
		t.Errorf("the agent started: %v", got)
	}
}

// A claim file the wrapper cannot use once the MCP server listens ends the wrapper as a
// configuration error, naming the file, without starting the agent.
func TestWrapperInAPoolPodRefusesABadClaimFile(t *testing.T) {
	_, standin := build(t)
	tests := []struct {
		name    string
		content string // "" writes no file
		want    string // in the error
	}{
		{"malformed", `{"project":`, "failed to read claim assignment"},
		{"incomplete", `{"project":"proj","task":"t1","kind":"implement"}`, "claim assignment has no directive"},
		{"missing", "", "not claimed yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claimFile := filepath.Join(t.TempDir(), "assignment.json")
			if tt.content != "" {
				if err := os.WriteFile(claimFile, []byte(tt.content), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			r := startPoolWrapper(t, standin, claimFile, mcpListener(t))
			if code := r.wait(t); code != 2 {
				t.Fatalf("exit code = %d, want 2 (a configuration error)", code)
			}
			l := r.waitLog(t, "invalid configuration: no usable claim once the MCP server listens")
			if errText, _ := l["error"].(string); l["level"] != "ERROR" || l["claim_file"] != claimFile || !strings.Contains(errText, tt.want) {
				t.Errorf("error line = %v, want the file %s and %q", l, claimFile, tt.want)
			}
			if tt.content != "" && !strings.Contains(l["error"].(string), claimFile) {
				t.Errorf("the error does not name the file %s: %v", claimFile, l["error"])
			}
			if got := r.find("agent started"); len(got) > 0 {
				t.Errorf("the agent started: %v", got)
			}
		})
	}
}
