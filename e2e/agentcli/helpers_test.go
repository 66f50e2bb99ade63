package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tatara.dev/e2e/internal/model"
	"tatara.dev/testkit/testutil"
)

const apiKey = "agentcli-test-key"

// standIn is a model stand-in on loopback that also keeps every request body it was sent and
// every path it was asked for, so a test can look for what the CLI put in the model's context and
// what it connected to.
type standIn struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	srv, err := model.NewServer(apiKey, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{}
	h := srv.Handler()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.mu.Lock()
			s.bodies = append(s.bodies, body)
			s.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// messages returns the records of the script's Messages API requests.
func (s *standIn) messages(t *testing.T, script string) []model.Record {
	t.Helper()
	resp, err := http.Get(s.URL + "/recorded?script=" + script) //nolint:noctx // loopback, the test's own server
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var recs model.Records
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		t.Fatalf("decode /recorded: %v", err)
	}
	var out []model.Record
	for _, r := range recs.Records {
		if r.Endpoint == "messages" {
			out = append(out, r)
		}
	}
	return out
}

func (s *standIn) requestsContaining(marker string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.bodies {
		if bytes.Contains(b, []byte(marker)) {
			n++
		}
	}
	return n
}

// requested tells whether any request asked for path.
func (s *standIn) requested(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.paths {
		if p == path {
			return true
		}
	}
	return false
}

func claudeCode(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TATARA_CLAUDE_CODE")
	if path == "" {
		t.Skip("TATARA_CLAUDE_CODE is not set: `make test` sets it to the pinned agent CLI (hack/claude-code.sh)")
	}
	return path
}

// buildWrapper builds the wrapper binary of this workspace, once per test binary.
func buildWrapper(t *testing.T) string {
	t.Helper()
	return testutil.BuildBinary(t, ".", "tatara.dev/wrapper/cmd/wrapper")
}

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// git runs git in dir with no system or global config.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, b)
	}
}

// cliEnv is the environment both ways of running the CLI share: a HOME of its own in dir, the
// model at modelURL, and env last.
func cliEnv(dir, modelURL string, env ...string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "ANTHROPIC_BASE_URL=" + modelURL,
		"ANTHROPIC_API_KEY=" + apiKey}
	if os.Getuid() == 0 {
		// The CLI refuses bypassPermissions as root unless told it is sandboxed; agent pods run as
		// UID 65532 and never set it.
		out = append(out, "IS_SANDBOX=1")
	}
	return append(out, env...)
}

// runWrapped runs the CLI under the wrapper in workdir, as in an agent pod, with the model at
// modelURL; env is added to the wrapper's environment, as a Project's extraEnvs are. dir holds
// the wrapper's state and the CLI's HOME.
func runWrapped(t *testing.T, wrapper, claude, dir, workdir, directive, modelURL string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// No tools: the wrapper starts the agent once something answers at the MCP URL; this answers
	// 404, so the CLI runs without the server.
	noTools := httptest.NewServer(http.NotFoundHandler())
	defer noTools.Close()
	cmd := exec.CommandContext(ctx, wrapper, "--agent-command", claude, "--directive", directive,
		"--workdir", workdir, "--state-dir", filepath.Join(dir, "state"), "--metrics-addr", "127.0.0.1:0",
		"--mcp-url", noTools.URL+"/mcp")
	cmd.Env = cliEnv(dir, modelURL, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrapper: %v\n%s", err, tail(out))
	}
	return out
}

// runDirect runs the CLI as the wrapper does (print mode, stream-json, bypassPermissions, the
// wrapper's default environment) but without it, reading the setting sources given; strictMCP
// adds --strict-mcp-config. It is the positive control of what the wrapper keeps out.
func runDirect(t *testing.T, claude, dir, workdir, directive, modelURL, settingSources string, strictMCP bool, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--setting-sources=" + settingSources,
		"--permission-mode", "bypassPermissions"}
	if strictMCP {
		args = append(args, "--strict-mcp-config")
	}
	cmd := exec.CommandContext(ctx, claude, append(args, "--", directive)...)
	cmd.Dir = workdir
	cmd.Env = cliEnv(dir, modelURL, append([]string{"CLAUDE_CONFIG_DIR=" + filepath.Join(dir, "claude"),
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, tail(out))
	}
	return out
}

func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
