package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"tatara.dev/cli/pkg/redact"
	"tatara.dev/testkit/testutil"
)

func TestArgs(t *testing.T) {
	got := Args("/state/mcp.json", "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f", "do it")
	want := []string{"-p", "--output-format", "stream-json", "--verbose", "--mcp-config=/state/mcp.json",
		"--strict-mcp-config", "--setting-sources=user", "--session-id", "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f",
		"--permission-mode", "bypassPermissions", "--", "do it"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Args = %q\nwant   %q", got, want)
	}
}

func TestEnv(t *testing.T) {
	tests := []struct {
		name   string
		parent []string
		want   []string
	}{
		{
			name: "breaking and dropped variables go, other CLAUDE_CODE_* pass, defaults are added",
			parent: []string{"PATH=/bin", "CLAUDE_CODE_CHILD_SESSION=1", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096",
				"CLAUDE_CONFIG_DIR=/home/x/.claude", "TATARA_TOKEN=secret", "ANTHROPIC_API_KEY=k", "ENABLE_TOOL_SEARCH=false"},
			want: []string{"PATH=/bin", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096", "ANTHROPIC_API_KEY=k", "ENABLE_TOOL_SEARCH=false",
				"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1", "CLAUDE_CONFIG_DIR=/state/claude"},
		},
		{
			name:   "a proxy leaves the agent's loopback MCP server direct: NO_PROXY gains 127.0.0.1 and localhost",
			parent: []string{"HTTPS_PROXY=http://proxy:3128", "NO_PROXY=.svc, 10.0.0.0/8", "no_proxy=localhost"},
			want: []string{"HTTPS_PROXY=http://proxy:3128", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"NO_PROXY=.svc,10.0.0.0/8,127.0.0.1,localhost", "no_proxy=localhost,127.0.0.1", "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1", "CLAUDE_CONFIG_DIR=/state/claude"},
		},
		{
			name:   "a NO_PROXY that already exempts loopback is left alone",
			parent: []string{"http_proxy=http://proxy:3128", "NO_PROXY=127.0.0.1,localhost", "no_proxy=localhost,127.0.0.1"},
			want: []string{"http_proxy=http://proxy:3128", "NO_PROXY=127.0.0.1,localhost", "no_proxy=localhost,127.0.0.1",
				"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1", "CLAUDE_CONFIG_DIR=/state/claude"},
		},
		{
			name:   "the wrapper's fixed values win over a Project's: no commit subjects in the system prompt",
			parent: []string{"CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=0", "PATH=/bin", "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS="},
			want: []string{"PATH=/bin", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1", "CLAUDE_CONFIG_DIR=/state/claude"},
		},
		{
			name:   "a Project's own value of a default wins",
			parent: []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=0", "DISABLE_TELEMETRY=1"},
			want:   []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=0", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1", "CLAUDE_CONFIG_DIR=/state/claude"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Env(tt.parent, "/state/claude", "TATARA_TOKEN"); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Env = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteMCPConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "mcp.json")
	if err := WriteMCPConfig(path, DefaultMCPURL); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(data)), `{"mcpServers":{"tatara":{"type":"http","url":"http://127.0.0.1:7777/mcp"}}}`; got != want {
		t.Fatalf("config = %s, want %s", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
	if err := WriteMCPConfig(filepath.Join(path, "under-a-file"), DefaultMCPURL); err == nil || !strings.Contains(err.Error(), "failed to") {
		t.Fatalf("writing under a file: err = %v", err)
	}
}

func TestProcess(t *testing.T) {
	const result = `{"type":"result","subtype":"success","is_error":false,"num_turns":3,"session_id":"s","total_cost_usd":0.5}`
	const initEv = `{"type":"system","subtype":"init","session_id":"s","tools":["a","b"],"mcp_servers":[{"name":"tatara","status":"failed"}]}`
	cases := []struct {
		name     string
		script   string
		signal   bool
		code     int
		sig      string
		final    bool
		logWants []string
	}{
		{"success with result event", "echo '" + initEv + "'; echo '" + result + "'", false, 0, "", true,
			[]string{`"msg":"agent initialized"`, `"level":"WARN"`, `"mcp_tatara":"failed"`}},
		{"exit code propagates", "exit 7", false, 7, "", false, nil},
		{"stderr is logged redacted", "echo 'Authorization: Bearer abcdefghijk' >&2; exit 1", false, 1, "", false,
			[]string{`"msg":"agent stderr"`, `Bearer [REDACTED]`}},
		{"forwarded SIGTERM", "trap 'exit 143' TERM; echo ready >&2; while :; do sleep 0.05; done", true, 143, "", false, nil},
		// The signal goes to the process group: a background child with its own trap gets it too
		// (its loop is bounded, so a run where it does not still ends).
		{"SIGTERM reaches the agent's children", "( trap 'echo child got TERM >&2; exit 0' TERM; echo ready >&2; for i in $(seq 200); do sleep 0.05; done ) & wait",
			true, 143, "terminated", false, []string{"child got TERM"}},
		// The agent moves itself into its parent's group, leaving its own empty.
		{"an agent that left its group still gets the signal",
			`exec perl -e 'setpgrp(0, getpgrp(getppid())) or die "setpgrp: $!"; $SIG{TERM} = sub { exit 143 }; print STDERR "ready\n"; select(undef, undef, undef, 0.05) while 1'`,
			true, 143, "", false, nil},
		{"killed by a signal", "kill -KILL $$", false, 137, "killed", false, nil},
		{"huge stdout line is skipped", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo '" + result + "'", false, 0, "", true, nil},
		{"leftover child holding stdout", "sleep 30 & echo '" + result + "'", false, 0, "", true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			p := &Process{Command: "/bin/sh", Args: []string{"-c", tc.script}, Env: os.Environ(),
				Log: slog.New(slog.NewJSONHandler(logs, nil)), Red: redact.New()}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			// Whatever is left of the agent's group (a failed run, a background child) goes.
			t.Cleanup(func() { _ = p.Signal(syscall.SIGKILL) })
			if tc.signal {
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(logs.String(), "ready") {
					if time.Now().After(deadline) {
						t.Fatal("agent never got ready")
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := p.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			res, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || res.Signal != tc.sig || (res.Final != nil) != tc.final {
				t.Fatalf("result = %+v, want code %d signal %q final %v", res, tc.code, tc.sig, tc.final)
			}
			if tc.final && (res.Final.NumTurns != 3 || res.Final.TotalCostUSD != 0.5) {
				t.Fatalf("final = %+v", res.Final)
			}
			for _, w := range tc.logWants {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("logs lack %s: %s", w, logs.String())
				}
			}
			if strings.Contains(logs.String(), "abcdefghijk") {
				t.Fatalf("secret leaked: %s", logs.String())
			}
		})
	}
}

func TestProcessStartFailure(t *testing.T) {
	p := &Process{Command: filepath.Join(t.TempDir(), "no-such-agent"), Log: slog.New(slog.DiscardHandler), Red: redact.New()}
	err := p.Start()
	if err == nil || !strings.Contains(err.Error(), "failed to start agent") {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamEventDecodes(t *testing.T) {
	var ev StreamEvent
	if err := json.Unmarshal([]byte(`{"type":"result","session_id":"x","num_turns":2}`), &ev); err != nil || ev.SessionID != "x" {
		t.Fatalf("ev = %+v, err = %v", ev, err)
	}
}

// TestStderrLongLines: a long stderr line is masked whole before it is cut into records, so a
// secret that straddles a record edge does not leak, and the records put together are the whole
// masked line.
func TestStderrLongLines(t *testing.T) {
	// The credential starts 7 bytes before the first record edge.
	straddling := strings.Repeat("a", maxStderrRecord-30) + " Authorization: Bearer abcdefghijklmnop " + strings.Repeat("é", 3000)
	cases := []struct {
		name      string
		input     string
		wantLines []string // the masked lines, each logged whole or as parts
	}{
		{"short line", "plain error\n", []string{"plain error"}},
		{"secret across a record edge", straddling + "\nnext\n",
			[]string{strings.Replace(straddling, "abcdefghijklmnop", redact.Mask, 1), "next"}},
		{"no trailing newline", "last words", []string{"last words"}},
		{"blank lines are skipped", "\n\r\nx\n", []string{"x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			p := &Process{Log: slog.New(slog.NewJSONHandler(logs, nil)), Red: redact.New()}
			p.readStderr(strings.NewReader(tc.input))
			var got []string
			var current strings.Builder
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec struct {
					Line  string `json:"line"`
					Part  int    `json:"part"`
					Parts int    `json:"parts"`
				}
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if len(rec.Line) > maxStderrRecord {
					t.Errorf("record of %d bytes exceeds %d", len(rec.Line), maxStderrRecord)
				}
				current.WriteString(rec.Line)
				if rec.Part == rec.Parts { // a whole line (0 == 0) or its last part
					got = append(got, current.String())
					current.Reset()
				}
			}
			if !reflect.DeepEqual(got, tc.wantLines) {
				t.Errorf("logged lines differ:\n got %.80q (%d lines)\nwant %.80q (%d lines)", got, len(got), tc.wantLines, len(tc.wantLines))
			}
			for _, piece := range []string{"abcdef", "klmnop"} {
				if strings.Contains(logs.String(), piece) {
					t.Errorf("a piece of the bearer credential (%s) leaked", piece)
				}
			}
		})
	}
}

// TestStderrInvalidUTF8 ends: a line of bytes that are never a rune start is still cut into
// bounded records.
func TestStderrInvalidUTF8(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	p := &Process{Log: slog.New(slog.NewJSONHandler(logs, nil)), Red: redact.New()}
	p.readStderr(bytes.NewReader(append(bytes.Repeat([]byte{0x80}, 3*maxStderrRecord), '\n')))
	if n := strings.Count(logs.String(), `"parts":3`); n != 3 {
		t.Errorf("got %d records with parts=3, want 3: %.300s", n, logs.String())
	}
}

// TestUserSettingsSkipWebFetchPreflightOnlyBehindAProxy: the settings file exists, with the
// preflight off, exactly when the agent's environment names a proxy (either case, any scheme
// variable); without one the CLI keeps its defaults and no file is written.
func TestUserSettingsSkipWebFetchPreflightOnlyBehindAProxy(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{[]string{"PATH=/bin"}, false},
		{[]string{"NO_PROXY=.svc"}, false},
		{[]string{"HTTPS_PROXY="}, false},
		{[]string{"HTTPS_PROXY=http://egress:3128"}, true},
		{[]string{"http_proxy=http://egress:3128"}, true},
		{[]string{"ALL_PROXY=http://egress:3128"}, true},
	} {
		dir := t.TempDir()
		if err := WriteUserSettings(dir, c.env); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, UserSettingsFile))
		if !c.want {
			if !os.IsNotExist(err) {
				t.Errorf("env %v: settings file %q (%v), want none", c.env, data, err)
			}
			continue
		}
		if err != nil || strings.TrimSpace(string(data)) != `{"skipWebFetchPreflight":true}` {
			t.Errorf("env %v: settings %q (%v), want the preflight skipped", c.env, data, err)
		}
	}
}
