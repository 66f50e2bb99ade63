package agentstandin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func TestParse(t *testing.T) {
	steps, err := Parse("# a comment\n\nsay hello world\nthink hmm\nlist-tools\ncall task_get\ncall task_note {\"text\":\"x\"}\nexpect ok\n" +
		"emit-tool-use mcp__tatara__report_internal_issue \"not an object\"\nraw \"\\x00{}\"\nsleep 10ms\nexit 3\n")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, s := range steps {
		ops = append(ops, s.Op)
	}
	if got := strings.Join(ops, " "); got != "say think list-tools call call expect emit-tool-use raw sleep exit" {
		t.Fatalf("ops = %s", got)
	}
	if steps[0].Text != "hello world" || steps[0].Line != 3 || string(steps[3].Args) != "{}" ||
		string(steps[4].Args) != `{"text":"x"}` || string(steps[6].Args) != `"not an object"` ||
		steps[7].Text != "\x00{}" || steps[9].Code != 3 {
		t.Fatalf("steps = %+v", steps)
	}

	bad := []struct{ script, want string }{
		{"", "no steps"},
		{"dance", `line 1 "dance": unknown step "dance"`},
		{"say hi\nsay", `line 2 "say": say needs text`},
		{"call", "call needs a tool name"},
		{"call t [1]", "arguments must be a JSON object"},
		{"call t {bad", "arguments must be a JSON object"},
		{"sleep forever", "sleep needs a duration"},
		{"exit 300", "exit needs a code 0..255"},
		{"list-tools now", "list-tools takes no argument"},
		{`raw "unterminated`, "raw text"},
	}
	for _, tc := range bad {
		t.Run(tc.script, func(t *testing.T) {
			_, err := Parse(tc.script)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) err = %v, want it to contain %q", tc.script, err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	const sid = "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f"
	good := []string{"-p", "--output-format", "stream-json", "--verbose", "--mcp-config=/x.json", "--strict-mcp-config",
		"--setting-sources=user", "--session-id", sid, "--permission-mode", "bypassPermissions", "say hi"}
	o, err := parseFlags(good, strings.NewReader(""))
	if err != nil || o.prompt != "say hi" || o.sessionID != sid || len(o.mcpConfig) != 1 || !o.strictMCP {
		t.Fatalf("options = %+v, err = %v", o, err)
	}
	if o, err := parseFlags([]string{"-p", "--", "- say a bullet"}, strings.NewReader("")); err != nil || o.prompt != "- say a bullet" {
		t.Fatalf("a prompt after -- that starts with - = %q, %v", o.prompt, err)
	}
	if o, err := parseFlags([]string{"-p"}, strings.NewReader("say from stdin")); err != nil || o.prompt != "say from stdin" {
		t.Fatalf("stdin prompt: %+v, %v", o, err)
	}
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"not print mode", []string{"say hi"}, "only supports print mode"},
		{"stream-json without verbose", []string{"-p", "--output-format", "stream-json", "x"}, "requires --verbose"},
		{"bad output format", []string{"-p", "--output-format", "yaml", "x"}, `--output-format "yaml"`},
		{"session id not a UUID", []string{"-p", "--session-id", "abc", "x"}, "must be a valid UUID"},
		{"bad permission mode", []string{"-p", "--permission-mode", "yolo", "x"}, `--permission-mode "yolo"`},
		{"bad setting source", []string{"-p", "--setting-sources=user,repo", "x"}, `"repo" is not one of user, project, local`},
		{"unknown flag", []string{"-p", "--frobnicate", "x"}, "flag provided but not defined: -frobnicate"},
		{"two prompts", []string{"-p", "a", "b"}, "want one prompt argument, got 2"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, strings.NewReader(""))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	if got := TranscriptPath("/cfg", "/a/b.c_d", "s"); got != "/cfg/projects/-a-b-c-d/s.jsonl" {
		t.Fatalf("path = %s", got)
	}
}

// newMCPServer serves two real tools over streamable HTTP.
func newMCPServer(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("tatara", "test")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("broken"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("backend unavailable"), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

type transcriptLine struct {
	ParentUUID *string `json:"parentUuid"`
	Type       string  `json:"type"`
	UUID       string  `json:"uuid"`
	SessionID  string  `json:"sessionId"`
	Message    struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

type block struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Text      string          `json:"text"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   []block         `json:"content"`
}

func TestRunAgainstRealMCPServer(t *testing.T) {
	const sid = "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f"
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "claude")
	t.Setenv("CLAUDE_CONFIG_DIR", cfgDir)
	t.Setenv("STANDIN_CREATE_DELAY", "10ms")
	t.Setenv("STANDIN_SPLIT_PAUSE", "1ms")
	t.Setenv("MCP_TEST_URL", newMCPServer(t))
	mcpConfig := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpConfig, []byte(`{"mcpServers":{"tatara":{"type":"http","url":"${MCP_TEST_URL}"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"say listing tools",
		"list-tools",
		"expect tools (2): broken, echo",
		`call echo {"text":"hi"}`,
		"expect echo: hi",
		"call mcp__tatara__broken",
		`emit-tool-use mcp__tatara__report_internal_issue {"category":"auth"}`,
		"exit 4",
		"say never reached",
	}, "\n")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"-p", "--output-format", "stream-json", "--verbose", "--mcp-config=" + mcpConfig,
		"--strict-mcp-config", "--session-id", sid, "--permission-mode", "bypassPermissions", script},
		strings.NewReader(""), &stdout, &stderr)
	if code != 4 {
		t.Fatalf("exit code = %d, stderr: %s", code, stderr.String())
	}

	cwd, _ := os.Getwd()
	data, err := os.ReadFile(TranscriptPath(cfgDir, cwd, sid))
	if err != nil {
		t.Fatal(err)
	}
	var lines []transcriptLine
	for _, raw := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var l transcriptLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("transcript line is not JSON: %v: %s", err, raw)
		}
		lines = append(lines, l)
	}
	var got []string
	for i, l := range lines {
		if l.SessionID != sid || (i > 0 && (l.ParentUUID == nil || *l.ParentUUID != lines[i-1].UUID)) {
			t.Fatalf("line %d: session %q parent %v, previous uuid %q", i, l.SessionID, l.ParentUUID, lines[max(i-1, 0)].UUID)
		}
		var blocks []block
		if json.Unmarshal(l.Message.Content, &blocks) != nil {
			got = append(got, l.Type+":prompt")
			continue
		}
		if len(blocks) != 1 {
			t.Fatalf("line %d has %d blocks, want one per line", i, len(blocks))
		}
		b := blocks[0]
		switch b.Type {
		case "tool_use":
			got = append(got, fmt.Sprintf("%s:tool_use:%s:%s", l.Type, b.Name, b.Input))
		case "tool_result":
			got = append(got, fmt.Sprintf("%s:tool_result:%v:%s", l.Type, b.IsError, b.Content[0].Text))
		default:
			got = append(got, l.Type+":"+b.Type+":"+b.Text)
		}
	}
	want := []string{
		"user:prompt",
		"assistant:text:listing tools",
		"assistant:text:tools (2): broken, echo",
		`assistant:tool_use:mcp__tatara__echo:{"text":"hi"}`,
		"user:tool_result:false:echo: hi",
		"assistant:tool_use:mcp__tatara__broken:{}",
		"user:tool_result:true:backend unavailable",
		`assistant:tool_use:mcp__tatara__report_internal_issue:{"category":"auth"}`,
		"user:tool_result:false:(stand-in: tool not executed)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// One reply's blocks share message.id; a tool result starts a new reply.
	if lines[1].Message.ID == "" || lines[1].Message.ID != lines[3].Message.ID || lines[3].Message.ID == lines[5].Message.ID {
		t.Fatalf("message ids: %q %q %q", lines[1].Message.ID, lines[3].Message.ID, lines[5].Message.ID)
	}

	events := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var first, last map[string]any
	if json.Unmarshal([]byte(events[0]), &first) != nil || json.Unmarshal([]byte(events[len(events)-1]), &last) != nil {
		t.Fatalf("stdout is not stream-json: %s", stdout.String())
	}
	if first["subtype"] != "init" || fmt.Sprint(first["mcp_servers"]) != "[map[name:tatara status:connected]]" ||
		fmt.Sprint(first["tools"]) != "[mcp__tatara__broken mcp__tatara__echo]" {
		t.Fatalf("init = %v", first)
	}
	if last["type"] != "result" || last["is_error"] != true || last["session_id"] != sid || len(events) != len(lines)+2 {
		t.Fatalf("result = %v, %d events for %d lines", last, len(events), len(lines))
	}
}

func TestRunFailures(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(dir, "claude"))
	t.Setenv("STANDIN_CREATE_DELAY", "0s")
	unreachable := `{"mcpServers":{"tatara":{"type":"http","url":"http://127.0.0.1:1/mcp"}}}`
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"call without a server", []string{"-p", "--mcp-config=" + unreachable, "call task_get"}, ExitStepFailed, "not connected"},
		{"expect fails", []string{"-p", "--mcp-config=" + unreachable, "say a\nexpect nothing"}, ExitStepFailed, `expected "nothing"`},
		{"bad script", []string{"-p", "jump"}, ExitUsage, `unknown step "jump"`},
		{"missing config file", []string{"-p", "--mcp-config=" + filepath.Join(dir, "none.json"), "say a"}, ExitUsage, "failed to read MCP config"},
		{"config without servers", []string{"-p", `--mcp-config={"x":1}`, "say a"}, ExitUsage, "no mcpServers object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tc.args, strings.NewReader(""), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("code = %d, stderr = %q; want %d and %q", code, stderr.String(), tc.code, tc.stderr)
			}
		})
	}
}

func TestNoTranscriptWhenPersistenceIsOff(t *testing.T) {
	const sid = "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f"
	cases := []struct {
		name string
		env  string
		flag []string
	}{
		{"inherited child session", "1", nil},
		{"--no-session-persistence", "", []string{"--no-session-persistence"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfgDir := filepath.Join(t.TempDir(), "claude")
			t.Setenv("CLAUDE_CONFIG_DIR", cfgDir)
			t.Setenv("CLAUDE_CODE_CHILD_SESSION", tc.env)
			t.Setenv("STANDIN_CREATE_DELAY", "0s")
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"-p", "--output-format", "stream-json", "--verbose", "--session-id", sid}, tc.flag...), "say hi")
			if code := Main(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("code = %d, stderr = %s", code, stderr.String())
			}
			if _, err := os.Stat(cfgDir); !os.IsNotExist(err) {
				t.Fatalf("transcript written although persistence is off: %v", err)
			}
			if !strings.Contains(stdout.String(), `"type":"result"`) {
				t.Fatalf("stdout = %s", stdout.String())
			}
		})
	}
}
