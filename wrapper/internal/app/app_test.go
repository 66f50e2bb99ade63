package app

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tatara.dev/cli/pkg/claim"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	base := map[string]string{"TATARA_DIRECTIVE": "do it", "TATARA_PROJECT": "p", "TATARA_TASK": "t"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c Config)
		err   string
	}{
		{"defaults", nil, base, func(t *testing.T, c Config) {
			if c.AgentCommand != "claude" || c.MetricsAddr != ":9090" || c.MCPURL != "http://127.0.0.1:7777/mcp" ||
				c.ConfigDir != filepath.Join(c.StateDir, "claude") || c.Linger != 0 || c.LogLevel != slog.LevelInfo || c.MCPWait != DefaultMCPWait ||
				c.Project != "p" || c.Task != "t" || c.Directive != "do it" {
				t.Fatalf("config = %+v", c)
			}
		}, ""},
		{"environment", nil, with("TATARA_AGENT_COMMAND", "/agent", "TATARA_WRAPPER_METRICS_ADDR", "127.0.0.1:0",
			"TATARA_WRAPPER_LINGER", "30s", "TATARA_WRAPPER_STATE_DIR", "/state", "TATARA_WRAPPER_LOG_LEVEL", "debug",
			"TATARA_WRAPPER_MCP_WAIT", "5s"),
			func(t *testing.T, c Config) {
				if c.AgentCommand != "/agent" || c.MetricsAddr != "127.0.0.1:0" || c.Linger != 30*time.Second || c.MCPWait != 5*time.Second ||
					c.ConfigDir != "/state/claude" || c.LogLevel != slog.LevelDebug {
					t.Fatalf("config = %+v", c)
				}
			}, ""},
		{"flags override the environment", []string{"--agent-command", "x", "--directive", "flag directive", "--claude-config-dir", "/c"},
			with("TATARA_AGENT_COMMAND", "y"), func(t *testing.T, c Config) {
				if c.AgentCommand != "x" || c.Directive != "flag directive" || c.ConfigDir != "/c" {
					t.Fatalf("config = %+v", c)
				}
			}, ""},
		{"no directive", nil, map[string]string{}, nil, "TATARA_DIRECTIVE (or --directive) is empty"},
		{"pool pod: no task nor directive until the claim", nil, map[string]string{"TATARA_PROJECT": "p", "TATARA_CLAIM_FILE": "/var/run/tatara/claim/assignment.json"},
			func(t *testing.T, c Config) {
				if c.ClaimFile != "/var/run/tatara/claim/assignment.json" || c.Task != "" || c.Directive != "" || c.Project != "p" {
					t.Fatalf("config = %+v", c)
				}
			}, ""},
		{"blank directive", nil, with("TATARA_DIRECTIVE", "  \n"), nil, "TATARA_DIRECTIVE (or --directive) is empty"},
		{"bad linger", nil, with("TATARA_WRAPPER_LINGER", "soon"), nil, `failed to parse TATARA_WRAPPER_LINGER "soon"`},
		{"bad scrape wait", nil, with("TATARA_WRAPPER_SCRAPE_WAIT", "70"), nil, `failed to parse TATARA_WRAPPER_SCRAPE_WAIT "70"`},
		{"negative scrape wait", []string{"--scrape-wait", "-1s"}, base, nil, "--linger and --scrape-wait >= 0"},
		{"bad log level", []string{"--log-level", "loud"}, base, nil, `failed to parse log level "loud"`},
		{"unknown flag", []string{"--nope"}, base, nil, "flag provided but not defined: -nope"},
		{"stray argument", []string{"extra"}, base, nil, `unexpected argument "extra"`},
		{"zero poll interval", []string{"--poll-interval", "0s"}, base, nil, "--poll-interval, --health-stale-after and --mcp-wait must be > 0"},
		{"zero MCP wait", nil, with("TATARA_WRAPPER_MCP_WAIT", "0s"), nil, "--mcp-wait must be > 0"},
		{"bad MCP wait", nil, with("TATARA_WRAPPER_MCP_WAIT", "1m later"), nil, `failed to parse TATARA_WRAPPER_MCP_WAIT "1m later"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.args, env(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestParseConfigKeepsTheAgentsDirsOutOfTheWorkspace: the working directory is a clone of code
// another agent may have written, and a Project's extraEnvs may set TATARA_WRAPPER_STATE_DIR and
// HOME: a state dir there would make the repository's claude/settings.json the CLI's user
// settings, a HOME there its .bashrc and .gitconfig the agent's. Paths are compared cleaned and
// absolute, and a sibling that only shares a prefix (/workspace-other) is not inside.
func TestParseConfigKeepsTheAgentsDirsOutOfTheWorkspace(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		home string
		err  []string // what the error names; nil = accepted
	}{
		{"state dir in the workspace", []string{"--workdir", "/workspace/r", "--state-dir", "/workspace/r/.tatara"}, "/home/agent",
			[]string{"TATARA_WRAPPER_STATE_DIR", `"/workspace/r/.tatara"`, `"/workspace/r"`}},
		{"state dir is the workspace", []string{"--workdir", "/workspace/r/", "--state-dir", "/workspace/r"}, "/home/agent",
			[]string{"TATARA_WRAPPER_STATE_DIR", `"/workspace/r"`}},
		{"state dir reached through ..", []string{"--workdir", "/workspace/r", "--state-dir", "/tmp/../workspace/r/x"}, "/home/agent",
			[]string{"TATARA_WRAPPER_STATE_DIR", `"/workspace/r/x"`, `"/workspace/r"`}},
		{"config dir in the workspace", []string{"--workdir", "/workspace/r", "--state-dir", "/tmp/s", "--claude-config-dir", "/workspace/r/claude"}, "/home/agent",
			[]string{"TATARA_CLAUDE_CONFIG_DIR", `"/workspace/r/claude"`, `"/workspace/r"`}},
		{"HOME in the workspace", []string{"--workdir", "/workspace/r", "--state-dir", "/tmp/s"}, "/workspace/r/home",
			[]string{"HOME", `"/workspace/r/home"`, `"/workspace/r"`}},
		{"HOME is the workspace", []string{"--workdir", "/workspace", "--state-dir", "/tmp/s"}, "/workspace",
			[]string{"HOME", `"/workspace"`}},
		{"relative state dir under the default working directory", []string{"--state-dir", "state"}, "/home/agent",
			[]string{"TATARA_WRAPPER_STATE_DIR", strconv.Quote(filepath.Join(cwd, "state")), strconv.Quote(cwd)}},
		{"HOME is the default working directory", []string{"--state-dir", "/tmp/s"}, cwd,
			[]string{"HOME", strconv.Quote(cwd)}},
		{"siblings that share a prefix", []string{"--workdir", "/workspace", "--state-dir", "/workspace-state"}, "/workspace-home", nil},
		{"the working directory under HOME", []string{"--workdir", "/home/agent/r", "--state-dir", "/tmp/s"}, "/home/agent", nil},
		{"the pod's layout", []string{"--workdir", "/workspace/r"}, "/home/agent", nil},
		{"no HOME", []string{"--workdir", "/workspace/r", "--state-dir", "/tmp/s"}, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(tc.args, env(map[string]string{"TATARA_DIRECTIVE": "x", "HOME": tc.home}))
			if tc.err == nil {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error naming %q", tc.err)
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to name %s", err, want)
				}
			}
			var stderr bytes.Buffer
			if code := Main(tc.args, env(map[string]string{"TATARA_DIRECTIVE": "x", "HOME": tc.home}), nil, &stderr); code != ExitUsage ||
				!strings.Contains(stderr.String(), `"msg":"invalid configuration"`) {
				t.Errorf("Main = %d, want %d (ExitUsage) and an invalid configuration log; stderr:\n%s", code, ExitUsage, stderr.String())
			}
		})
	}
}

// TestMainMasksTheTokenByShape: the wrapper does not know the Task token (it has no
// TATARA_TOKEN), yet a token in what it logs, here echoed in a configuration error, is masked
// by its shape.
func TestMainMasksTheTokenByShape(t *testing.T) {
	tok := "tatara_" + strings.Repeat("0123456789abcdef", 4)
	var stderr bytes.Buffer
	code := Main([]string{"--log-level", tok}, env(map[string]string{"TATARA_DIRECTIVE": "x"}), nil, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), `"msg":"invalid configuration"`) {
		t.Fatalf("code = %d, stderr = %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), tok) || !strings.Contains(stderr.String(), "tatara_[REDACTED]") {
		t.Fatalf("token not masked by shape: %s", stderr.String())
	}
}

// TestMainRefusesATakenMetricsPort: when something else (the agent, which shares the pod's network
// namespace) holds the metrics port, the wrapper exits ExitSetup before starting the agent, and
// says which address was taken; it never serves beside a listener that is not its own.
func TestMainRefusesATakenMetricsPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	var stderr bytes.Buffer
	code := Main([]string{"--metrics-addr", taken.Addr().String()}, env(map[string]string{"TATARA_DIRECTIVE": "x", "TATARA_CLAUDE_CONFIG_DIR": t.TempDir()}), nil, &stderr)
	if code != ExitSetup {
		t.Fatalf("exit code %d, want %d (ExitSetup); stderr:\n%s", code, ExitSetup, stderr.String())
	}
	for _, want := range []string{`"msg":"failed to start metrics server"`, taken.Addr().String(), "address already in use"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), `"msg":"agent started"`) {
		t.Errorf("the agent was started:\n%s", stderr.String())
	}
}

// TestApplyClaim: the claim gives the agent its Task's variables, as a cold pod's wrapper env has
// them, replacing any the pool pod's env has; its checkout becomes the working directory.
func TestApplyClaim(t *testing.T) {
	base := Config{Project: "p", TaskKind: "implement", WorkDir: "/workspace"}
	environ := []string{"PATH=/bin", "TATARA_PROJECT=p", "TATARA_TASK=", "TATARA_PUSH_BRANCH=stale"}
	tests := []struct {
		name    string
		a       claim.Assignment
		workDir string
		env     []string
	}{
		{"checkout with push", claim.Assignment{Project: "p", Task: "t1", Kind: "implement", Directive: "do it", RepoDir: "/workspace/r", PushBranch: "tatara/t1-ab"},
			"/workspace/r", []string{"PATH=/bin", "TATARA_PROJECT=p", "TATARA_TASK=t1", "TATARA_DIRECTIVE=do it", "TATARA_PUSH_BRANCH=tatara/t1-ab"}},
		{"no repository", claim.Assignment{Project: "p", Task: "t2", Kind: "implement", Directive: "think"},
			"/workspace", []string{"PATH=/bin", "TATARA_PROJECT=p", "TATARA_TASK=t2", "TATARA_DIRECTIVE=think"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, env := applyClaim(base, environ, tt.a)
			if c.Task != tt.a.Task || c.Directive != tt.a.Directive || c.WorkDir != tt.workDir || c.Project != "p" {
				t.Errorf("config = %+v", c)
			}
			if strings.Join(env, "\n") != strings.Join(tt.env, "\n") {
				t.Errorf("env = %q, want %q", env, tt.env)
			}
		})
	}
}
