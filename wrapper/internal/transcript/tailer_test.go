package transcript

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/pkg/redact"
	"tatara.dev/wrapper/internal/agent"
)

func TestInternalIssueToolName(t *testing.T) {
	if internalIssueToolName != "mcp__tatara__report_internal_issue" {
		t.Fatalf("internalIssueToolName = %q", internalIssueToolName)
	}
	// The agent CLI derives the prefix from the MCP config key the wrapper writes.
	if want := "mcp__" + agent.MCPServerName + "__report_internal_issue"; internalIssueToolName != want {
		t.Fatalf("internalIssueToolName = %q, but the MCP config key gives %q", internalIssueToolName, want)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := agent.WriteMCPConfig(path, agent.DefaultMCPURL); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(cfg.MCPServers))
	for k := range cfg.MCPServers {
		keys = append(keys, k)
	}
	if len(keys) != 1 || "mcp__"+keys[0]+"__report_internal_issue" != internalIssueToolName {
		t.Fatalf("MCP config servers %v do not produce %q", keys, internalIssueToolName)
	}
}

func TestInternalIssue(t *testing.T) {
	type want struct {
		level, category, severity string
		parseError                bool
		fields                    map[string]string
	}
	cases := []struct {
		name  string
		input string
		want  want
	}{
		{"missing severity defaults to error", `{"category":"auth","description":"token rejected"}`,
			want{"ERROR", "auth", "error", false, map[string]string{"description": "token rejected"}}},
		{"unknown category clamps to other", `{"category":"cosmic_rays","severity":"warn","description":"d"}`,
			want{"WARN", "other", "warn", false, map[string]string{"raw_category": "cosmic_rays"}}},
		{"unknown severity clamps to error", `{"category":"auth","severity":"fatal","description":"d"}`,
			want{"ERROR", "auth", "error", false, map[string]string{"raw_severity": "fatal"}}},
		{"all fields", `{"category":"tool_error","severity":"warn","description":"code_search 500","offending_tool":"code_search","resource_id":"repo/x"}`,
			want{"WARN", "tool_error", "warn", false, map[string]string{"description": "code_search 500", "offending_tool": "code_search", "resource_id": "repo/x"}}},
		{"empty object", `{}`, want{"ERROR", "other", "error", false, nil}},
		{"input is a string", `"category=auth"`, want{"ERROR", "other", "error", true, nil}},
		{"input is an array", `[1,2]`, want{"ERROR", "other", "error", true, nil}},
		{"field of the wrong type", `{"category":7}`, want{"ERROR", "other", "error", true, nil}},
		{"input too large to keep", `{"category":"auth","description":"` + strings.Repeat("x", inputBytes) + `"}`,
			want{"ERROR", "other", "error", true, nil}},
		{"secret in description is redacted", `{"category":"auth","description":"sent Authorization: Bearer abcdef123456 and tok-literal-0123456789"}`,
			want{"ERROR", "auth", "error", false, map[string]string{"description": "sent Authorization: Bearer [REDACTED] and [REDACTED]"}}},
	}
	for cat := range issueCategories {
		for sev := range issueSeverities {
			level := "ERROR"
			if sev == "warn" {
				level = "WARN"
			}
			cases = append(cases, struct {
				name  string
				input string
				want  want
			}{
				"valid " + cat + "/" + sev,
				fmt.Sprintf(`{"category":%q,"severity":%q,"description":"something broke"}`, cat, sev),
				want{level, cat, sev, false, map[string]string{"description": "something broke"}},
			})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeIssueCounter{}
			tl, logs := newTestTailer(WithInternalIssueCounter(fake), WithRedactor(redact.New("tok-literal-0123456789")))
			feed(tl, assistantLine("msg_1", toolUseBlock("toolu_1", internalIssueToolName, tc.input)))

			// (a) the generic agent_stream line is still there.
			streams := logs.records(t, "agent_stream")
			if len(streams) != 1 || streams[0]["type"] != "tool_use" || streams[0]["tool"] != internalIssueToolName || streams[0]["level"] != "INFO" {
				t.Fatalf("agent_stream lines = %v", streams)
			}
			// (b) one internal-issue record with the right level and fields.
			issues := logs.records(t, "internal issue reported")
			if len(issues) != 1 {
				t.Fatalf("internal issue lines = %d, want 1: %s", len(issues), logs.text())
			}
			got := issues[0]
			if got["level"] != tc.want.level || got["action"] != "internal_issue_report" ||
				got["category"] != tc.want.category || got["severity"] != tc.want.severity ||
				got["turn_id"] != "msg_1" || got["tool_use_id"] != "toolu_1" {
				t.Fatalf("internal issue line = %v", got)
			}
			if _, has := got["parse_error"]; has != tc.want.parseError {
				t.Fatalf("parse_error present = %v, want %v: %v", has, tc.want.parseError, got)
			}
			for k, v := range tc.want.fields {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if strings.Contains(logs.text(), "abcdef123456") || strings.Contains(logs.text(), "tok-literal-0123456789") {
				t.Fatalf("secret leaked into logs: %s", logs.text())
			}
			// (c) counted once with the clamped labels.
			if want := [][]string{{tc.want.category, tc.want.severity}}; !reflect.DeepEqual(fake.calls, want) {
				t.Fatalf("counter calls = %v, want %v", fake.calls, want)
			}
			if v := testutil.ToFloat64(fake.counts[tc.want.category+"/"+tc.want.severity]); v != 1 {
				t.Fatalf("counter = %v, want 1", v)
			}
		})
	}
}

func TestInternalIssueCountedOncePerToolUseID(t *testing.T) {
	fake := &fakeIssueCounter{}
	tl, logs := newTestTailer(WithInternalIssueCounter(fake))
	block := toolUseBlock("toolu_same", internalIssueToolName, `{"category":"auth"}`)
	feed(tl, assistantLine("msg_1", block), assistantLine("msg_1", block))
	if n := len(logs.records(t, "internal issue reported")); n != 1 || len(fake.calls) != 1 {
		t.Fatalf("internal issue logged %d times, counted %d times; want 1, 1", n, len(fake.calls))
	}
}

func TestNilCountersAreSafe(t *testing.T) {
	var nilVec *prometheus.CounterVec
	for name, opts := range map[string][]Option{
		"nil interfaces": {WithCounter(nil), WithInternalIssueCounter(nil)},
		"nil vectors":    {WithCounter(nilVec), WithInternalIssueCounter(nilVec)},
	} {
		t.Run(name, func(t *testing.T) {
			tl, logs := newTestTailer(opts...)
			feed(tl, assistantLine("m", toolUseBlock("toolu_x", internalIssueToolName, `{"category":"auth"}`)))
			if n := len(logs.records(t, "internal issue reported")); n != 1 {
				t.Fatalf("internal issue lines = %d, want 1", n)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	glued := assistantLine("m1", textBlock("a")) + assistantLine("m1", textBlock("b"))
	cut := assistantLine("m2", textBlock("will be cut"))
	cases := []struct {
		name string
		line string
		want []string
	}{
		{"text", assistantLine("m", textBlock("hello")), []string{"text"}},
		{"thinking", assistantLine("m", `{"type":"thinking","thinking":"hmm","signature":"sig"}`), []string{"thinking"}},
		{"tool_use", assistantLine("m", toolUseBlock("toolu_a", "Bash", `{"command":"ls"}`)), []string{"tool_use"}},
		{"tool_result string", toolResultLine("toolu_a", "out", false), []string{"tool_result"}},
		{"tool_result blocks", `{"type":"user","uuid":"u-tr","message":{"role":"user","content":[{"tool_use_id":"t","type":"tool_result","content":[{"type":"text","text":"x"}]}]}}`, []string{"tool_result"}},
		{"image block", `{"type":"user","uuid":"u-img","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AAAA"}}]}}`, []string{"image"}},
		{"user prompt string", userPromptLine("do the thing"), []string{"text"}},
		{"empty content", `{"type":"assistant","uuid":"u-e","message":{"id":"m","content":[]}}`, []string{"assistant"}},
		{"two blocks on one line", `{"type":"assistant","uuid":"u-2","message":{"id":"m","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"toolu_2","name":"Read","input":{}}]}}`, []string{"text", "tool_use"}},
		{"system", `{"type":"system","subtype":"compact_boundary","uuid":"u-s","content":"Conversation compacted"}`, []string{"system"}},
		{"summary", `{"type":"summary","summary":"Fix the bug","leafUuid":"x"}`, []string{"summary"}},
		{"file-history-snapshot", `{"type":"file-history-snapshot","messageId":"x","snapshot":{}}`, []string{"file-history-snapshot"}},
		{"unknown record type", `{"type":"brand-new-thing","uuid":"u-n"}`, []string{"other"}},
		{"no type", `{"uuid":"u-no"}`, []string{"other"}},
		{"unknown block type", `{"type":"assistant","uuid":"u-b","message":{"id":"m","content":[{"type":"hologram"}]}}`, []string{"other"}},
		{"field of the wrong type is tolerated", `{"type":"assistant","uuid":"u-w","isSidechain":"yes","message":{"id":"m","content":[{"type":"text","text":"a"}]}}`, []string{"text"}},
		{"content of the wrong type is tolerated", `{"type":"user","uuid":"u-c","message":{"role":"user","content":42}}`, []string{"text"}},
		{"array line", `[1,2,3]`, []string{"malformed"}},
		{"number line", `42`, []string{"malformed"}},
		{"garbage", `not json at all`, []string{"malformed"}},
		{"truncated", cut[:len(cut)/2], []string{"malformed"}},
		{"glued records", glued, []string{"text", "text"}},
		{"truncated record glued to a full one", cut[:len(cut)/2] + assistantLine("m3", textBlock("whole")), []string{"malformed", "text"}},
		{"truncated inside a string glued to a full one", cut[:strings.Index(cut, "will be")+4] + assistantLine("m4", textBlock("whole")), []string{"malformed", "text"}},
		{"NUL run before a record", "\x00\x00\x00\x00" + assistantLine("m", textBlock("after nuls")), []string{"text"}},
		{"NUL run between records", assistantLine("m", textBlock("a")) + "\x00\x00" + assistantLine("m", textBlock("b")), []string{"text", "text"}},
		{"only NULs", "\x00\x00\x00", nil},
		{"CRLF", assistantLine("m", textBlock("crlf")) + "\r", []string{"text"}},
		{"U+2028 inside a string", assistantLine("m", textBlock("a\u2028b\u2029c")), []string{"text"}},
		{"blank", "   ", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_total", Help: "h"}, []string{"type"})
			reg.MustRegister(vec)
			tl, logs := newTestTailer(WithCounter(vec))
			feed(tl, tc.line)
			got := logs.eventTypes(t)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events = %v, want %v\nlogs: %s", got, tc.want, logs.text())
			}
			counts := map[string]float64{}
			for _, l := range tc.want {
				counts[l]++
			}
			for l, n := range counts {
				if v := testutil.ToFloat64(vec.WithLabelValues(l)); v != n {
					t.Errorf("counter{type=%q} = %v, want %v", l, v, n)
				}
			}
			if n := testutil.CollectAndCount(vec); n != len(counts) {
				t.Errorf("%d label values counted, want %d", n, len(counts))
			}
		})
	}
}

func TestDuplicates(t *testing.T) {
	tl, logs := newTestTailer()
	line := assistantLine("m", toolUseBlock("toolu_d", "Bash", `{}`))
	// Same line again (resume), then the same tool_use id on a new line.
	feed(tl, line, line, assistantLine("m", toolUseBlock("toolu_d", "Bash", `{}`)))
	if got := logs.eventTypes(t); !reflect.DeepEqual(got, []string{"tool_use"}) {
		t.Fatalf("events = %v, want one tool_use", got)
	}
	if s := tl.Summary(); s.ToolUses != 1 || s.Turns != 1 || s.OutputTokens != 5 {
		t.Fatalf("summary = %+v", s)
	}
}

func TestRedaction(t *testing.T) {
	tl, logs := newTestTailer(WithRedactor(redact.New("the-task-token-value-123")))
	feed(tl,
		assistantLine("m", textBlock("curl -H 'Authorization: Bearer sk-ant-api03-abcdefghijklmnopqrstuvwxyz' with the-task-token-value-123")),
		assistantLine("m", toolUseBlock("toolu_r", "Bash", `{"command":"export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789","api_key":"plainsecretvalue"}`)),
	)
	out := logs.text()
	for _, secret := range []string{"sk-ant-api03", "the-task-token-value-123", "ghp_abcdef", "plainsecretvalue"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, redact.Mask) {
		t.Fatalf("nothing was masked: %s", out)
	}
}

func TestOversizeLineFromHead(t *testing.T) {
	big := strings.Repeat("y", 3000)
	cases := []struct {
		name   string
		line   string
		want   string
		fields map[string]any
	}{
		{"tool_result", toolResultLine("toolu_big", big, false), "tool_result", map[string]any{"tool_use_id": "toolu_big"}},
		{"tool_use", assistantLine("m", toolUseBlock("toolu_bigin", "Write", `{"content":"`+big+`"}`)), "tool_use", map[string]any{"tool": "Write", "tool_use_id": "toolu_bigin"}},
		{"text", assistantLine("m", textBlock(big)), "text", nil},
		{"record without blocks", `{"type":"system","uuid":"u-big","content":"` + big + `"}`, "system", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl, logs := newTestTailer(WithMaxLineBytes(1024))
			// The caller passes the head only, as the file reader does.
			tl.processLine(source{kind: "main"}, []byte(tc.line[:1024]), int64(len(tc.line)))
			recs := logs.records(t, "agent_stream")
			if len(recs) != 1 || recs[0]["type"] != tc.want || recs[0]["truncated"] != true ||
				recs[0]["line_bytes"] != float64(len(tc.line)) {
				t.Fatalf("agent_stream = %v", recs)
			}
			for k, v := range tc.fields {
				if recs[0][k] != v {
					t.Errorf("%s = %v, want %v", k, recs[0][k], v)
				}
			}
		})
	}
	t.Run("internal issue too large", func(t *testing.T) {
		fake := &fakeIssueCounter{}
		tl, logs := newTestTailer(WithMaxLineBytes(1024), WithInternalIssueCounter(fake))
		line := assistantLine("m", toolUseBlock("toolu_ii", internalIssueToolName, `{"category":"auth","description":"`+big+`"}`))
		tl.processLine(source{kind: "main"}, []byte(line[:1024]), int64(len(line)))
		issues := logs.records(t, "internal issue reported")
		if len(issues) != 1 || issues[0]["parse_error"] == nil || len(fake.calls) != 1 {
			t.Fatalf("issues = %v, counter calls = %v", issues, fake.calls)
		}
	})
}

func TestSecretAcrossTheLogCutIsMaskedWhole(t *testing.T) {
	const token = "tatara-task-token-abcdef0123456789"
	for _, pad := range []int{maxLoggedBytes - 10, maxLoggedBytes - 30, previewBytes - 10} {
		t.Run(fmt.Sprint(pad), func(t *testing.T) {
			tl, logs := newTestTailer(WithRedactor(redact.New(token)))
			text := strings.Repeat("a", pad) + " " + token + " " + strings.Repeat("b", 2000)
			feed(tl, assistantLine("m", textBlock(text)),
				assistantLine("m", toolUseBlock("toolu_cut", "Bash", `{"command":"`+text+`"}`)))
			out := logs.text()
			for i := 8; i <= len(token); i++ {
				if strings.Contains(out, token[:i]) {
					t.Fatalf("a %d-byte prefix of the token reached the log", i)
				}
			}
		})
	}
}
