package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tatara.dev/cli/internal/cli"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/testkit/testutil"
)

const gatewayToken = "gw-token-7d1e5a93c0b2"

func writeTokenFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad flags stop the command before it listens, with an error naming the flag and no secret.
func TestGitGatewayFlagErrors(t *testing.T) {
	good := writeTokenFile(t, gatewayToken+"\n")
	empty := writeTokenFile(t, " \n\t")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no flags", nil, `required flag(s) "token-file", "upstream" not set`},
		{"neither branch prefix nor claim file", []string{"--upstream=https://git.example.com/r.git", "--token-file=" + good},
			"at least one of the flags in the group [branch-prefix claim-file] is required"},
		{"branch prefix and claim file", []string{"--upstream=https://git.example.com/r.git", "--token-file=" + good, "--branch-prefix=tatara/t1", "--claim-file=/claim/assignment.json"},
			"if any flags in the group [branch-prefix claim-file] are set none of the others can be"},
		{"missing token file", []string{"--upstream=https://git.example.com/r.git", "--token-file=/nonexistent/token", "--branch-prefix=tatara/t1"}, "failed to read --token-file"},
		{"empty token file", []string{"--upstream=https://git.example.com/r.git", "--token-file=" + empty, "--branch-prefix=tatara/t1"}, "it is empty"},
		{"credential in the upstream", []string{"--upstream=https://x:" + gatewayToken + "@git.example.com/r.git", "--token-file=" + good, "--branch-prefix=tatara/t1"}, "must not carry credentials"},
		{"unparsable upstream", []string{"--upstream=https://x:" + gatewayToken + "@git.example.com:port/r.git", "--token-file=" + good, "--branch-prefix=tatara/t1"}, "invalid --upstream"},
		{"ssh upstream", []string{"--upstream=ssh://git@git.example.com/r.git", "--token-file=" + good, "--branch-prefix=tatara/t1"}, "scheme must be http or https"},
		{"bad branch prefix", []string{"--upstream=https://git.example.com/r.git", "--token-file=" + good, "--branch-prefix=tatara/../main"}, "invalid branch prefix"},
		{"bad max push bytes", []string{"--upstream=https://git.example.com/r.git", "--token-file=" + good, "--branch-prefix=tatara/t1", "--max-push-bytes=-5"}, "invalid max push bytes -5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Execute(append([]string{"git-gateway", "--listen=127.0.0.1:0"}, tt.args...), &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.wantErr)
			}
			if strings.Contains(stderr.String(), gatewayToken) {
				t.Fatalf("the token is in the output: %s", stderr.String())
			}
		})
	}
}

// The binary as the agent pod runs it: /healthz and /metrics on --metrics-addr, 404 for what
// is not git smart-HTTP, 403 for a push outside the branch, JSON logs without the token, and a
// clean exit on SIGTERM.
func TestGitGatewayBinary(t *testing.T) {
	addrs := freeAddrs(t, 2)
	listen, metricsAddr := addrs[0], addrs[1]
	cmd := exec.Command(tataraBin(t), "git-gateway", "--listen", listen, "--metrics-addr", metricsAddr,
		"--upstream", "http://127.0.0.1:1/demo.git", "--token-file", writeTokenFile(t, "  "+gatewayToken+"\n"), "--branch-prefix", "tatara/t1")
	logs, logsDone := startLogged(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	testutil.WaitFor(t, "startup log", func() bool { return logs.find("git gateway started") != nil })
	start := logs.find("git gateway started")
	if start["branch"] != "refs/heads/tatara/t1" || start["upstream"] != "http://127.0.0.1:1/demo.git" || start["listen"] != "http://"+listen+"/" {
		t.Errorf("startup log = %v", start)
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("http://" + metricsAddr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get("http://" + listen + "/objects/info/packs"); code != http.StatusNotFound {
		t.Errorf("/objects/info/packs = %d, want 404", code)
	}
	oid := strings.Repeat("1", 40)
	line := fmt.Sprintf("%s %s refs/heads/main\x00report-status", strings.Repeat("0", 40), oid)
	push := fmt.Sprintf("%04x%s0000", len(line)+4, line)
	resp, err := http.Post("http://"+listen+"/git-receive-pack", "application/x-git-receive-pack-request", strings.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// git's own report: the ref rejected ("ng") with the rule, which git shows the agent.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ng refs/heads/main refs/heads/main is outside refs/heads/tatara/t1 (the Task's branch)") {
		t.Errorf("push to main: %d %q, want a report rejecting the ref with the rule", resp.StatusCode, body)
	}
	if _, text := get("http://" + metricsAddr + "/metrics"); !strings.Contains(text, `tatara_git_gateway_pushes_total{outcome="refused"} 1`) ||
		!strings.Contains(text, `tatara_git_gateway_pushes_total{outcome="accepted"} 0`) {
		t.Errorf("/metrics lacks the push counter:\n%s", text)
	}
	testutil.WaitFor(t, "refusal log", func() bool { return logs.find("git push refused") != nil })
	if rec := logs.find("git push refused"); rec["level"] != "WARN" {
		t.Errorf("refusal log = %v", rec)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v (want 0); log: %s", err, strings.Join(logs.raw, "\n"))
	}
	if logs.find("git gateway stopping") == nil {
		t.Errorf("no shutdown log line")
	}
	for _, l := range logs.raw {
		if strings.Contains(l, gatewayToken) {
			t.Errorf("the token reached the log: %s", l)
		}
	}
}

// The binary in a warm pool's pod (--claim-file): /healthz answers at once, a push before the
// claim is refused with 503 saying the pod is not claimed yet, and once the cli has written the
// assignment, the push is checked against its push branch.
func TestGitGatewayBinaryWithClaimFile(t *testing.T) {
	addrs := freeAddrs(t, 2)
	listen, metricsAddr := addrs[0], addrs[1]
	claimFile := filepath.Join(t.TempDir(), "assignment.json")
	cmd := exec.Command(tataraBin(t), "git-gateway", "--listen", listen, "--metrics-addr", metricsAddr,
		"--upstream", "http://127.0.0.1:1/demo.git", "--token-file", writeTokenFile(t, gatewayToken), "--claim-file", claimFile)
	logs, logsDone := startLogged(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	testutil.WaitFor(t, "startup log", func() bool { return logs.find("git gateway started") != nil })
	if start := logs.find("git gateway started"); start["claim_file"] != claimFile || start["branch"] != nil {
		t.Errorf("startup log = %v, want the claim file and no branch", start)
	}
	resp, err := http.Get("http://" + metricsAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz before the claim = %d, want 200", resp.StatusCode)
	}

	oid := strings.Repeat("1", 40)
	line := fmt.Sprintf("%s %s refs/heads/main\x00report-status", strings.Repeat("0", 40), oid)
	push := fmt.Sprintf("%04x%s0000", len(line)+4, line)
	post := func() (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+listen+"/git-receive-pack", "application/x-git-receive-pack-request", strings.NewReader(push))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	tests := []struct {
		name     string
		claim    *claim.Assignment
		wantCode int
		wantBody string
	}{
		{"before the claim", nil, http.StatusServiceUnavailable, "this pod is not claimed yet"},
		{"after the claim", &claim.Assignment{Project: "proj", Task: "t1", Kind: "implement", Directive: "d", RepoDir: "/workspace/demo", PushBranch: "tatara/t1"},
			http.StatusOK, "ng refs/heads/main refs/heads/main is outside refs/heads/tatara/t1 (the Task's branch)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.claim != nil {
				if err := claim.WriteFile(claimFile, *tt.claim); err != nil {
					t.Fatal(err)
				}
			}
			if code, body := post(); code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("push to main: %d %q, want %d and %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	testutil.WaitFor(t, "pod claimed log", func() bool { return logs.find("pod claimed") != nil })
	if rec := logs.find("pod claimed"); rec == nil || rec["branch"] != "refs/heads/tatara/t1" || rec["task"] != "t1" {
		t.Errorf("pod claimed log = %v", rec)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v (want 0); log: %s", err, strings.Join(logs.raw, "\n"))
	}
}
