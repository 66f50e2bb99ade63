package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []Step
		wantErr string
	}{
		{
			name: "calls then say; lowercase names are tatara tools, others verbatim",
			text: "\ntatara-model-script id=t1\n# a comment\ncall task_get\ncall Bash {\"command\": \"ls\"}\ncall mcp__other__x {}\nsay done\ncall ignored {}",
			want: []Step{
				{Tool: "mcp__tatara__task_get", Input: json.RawMessage(`{}`)},
				{Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
				{Tool: "mcp__other__x", Input: json.RawMessage(`{}`)},
				{Text: "done"},
			},
		},
		{name: "no header", text: "call task_get {}", wantErr: `want "tatara-model-script id=<id>"`},
		{name: "bad id", text: "tatara-model-script id=a/b\nsay x", wantErr: `script id "a/b"`},
		{name: "input not an object", text: "tatara-model-script id=a\ncall x [1]", wantErr: "line 2: call x input is not a JSON object"},
		{name: "unknown verb", text: "tatara-model-script id=a\nexpect x", wantErr: `line 2: unknown step "expect"`},
		{name: "empty say", text: "tatara-model-script id=a\nsay", wantErr: "line 2: say needs text"},
		{name: "no steps", text: "tatara-model-script id=a\n", wantErr: "no steps"},
		{name: "empty", text: " \n", wantErr: "empty script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseScript(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Steps) != len(tt.want) {
				t.Fatalf("steps = %+v, want %+v", s.Steps, tt.want)
			}
			for i, st := range s.Steps {
				if st.Tool != tt.want[i].Tool || string(st.Input) != string(tt.want[i].Input) || st.Text != tt.want[i].Text {
					t.Errorf("step %d = %+v, want %+v", i, st, tt.want[i])
				}
			}
		})
	}
}

// conversation builds Messages API requests the way the agent CLI does: its reminder block, then
// the prompt, then the turns so far.
type conversation struct {
	tools    []map[string]any
	system   string
	messages []map[string]any
}

func newConversation(prompt string, tools []map[string]any, system string) *conversation {
	return &conversation{tools: tools, system: system, messages: []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "<system-reminder>\nbe helpful\n</system-reminder>"},
		{"type": "text", "text": prompt},
	}}}}
}

func (c *conversation) body(stream bool) string {
	msgs := c.messages
	if c.system != "" {
		msgs = append([]map[string]any{msgs[0], {"role": "system", "content": []map[string]any{{"type": "text", "text": c.system}}}}, msgs[1:]...)
	}
	raw, _ := json.Marshal(map[string]any{"model": "m", "stream": stream, "max_tokens": 100, "system": "you are an agent",
		"messages": msgs, "tools": c.tools})
	return string(raw)
}

// answered appends the assistant's reply and the tool result the CLI would send back.
func (c *conversation) answered(reply apiMessage, result any, isError bool) {
	c.messages = append(c.messages, map[string]any{"role": "assistant", "content": reply.Content})
	if reply.StopReason == "tool_use" {
		c.messages = append(c.messages, map[string]any{"role": "user", "content": []map[string]any{
			{"type": "tool_result", "tool_use_id": reply.Content[0].ID, "content": result, "is_error": isError}}})
	}
}

func schemaTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "the " + name + " tool, which does a thing with some detail",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"task": map[string]any{"type": "string"}}}}
}

func newTestServer(t *testing.T, key string) *httptest.Server {
	t.Helper()
	s, err := NewServer(key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// response is a read and closed HTTP response.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, key, body string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: raw}
}

func send(t *testing.T, ts *httptest.Server, c *conversation) apiMessage {
	t.Helper()
	resp := post(t, ts.URL+"/v1/messages", "k", c.body(false))
	if resp.code != http.StatusOK {
		t.Fatalf("status %d: %s", resp.code, resp.body)
	}
	var m apiMessage
	if err := json.Unmarshal(resp.body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func recorded(t *testing.T, ts *httptest.Server, script string) []Record {
	t.Helper()
	resp, err := http.Get(ts.URL + "/recorded?script=" + script)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out Records
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Records
}

const script = "tatara-model-script id=s1\ncall report_internal_issue {\"category\":\"tool_error\"}\ncall task_get\nsay all done"

func TestInlineToolsFollowTheScript(t *testing.T) {
	ts := newTestServer(t, "k")
	c := newConversation(script, []map[string]any{schemaTool("Bash"), schemaTool("mcp__tatara__report_internal_issue"), schemaTool("mcp__tatara__task_get")}, "")

	first := send(t, ts, c)
	if first.StopReason != "tool_use" || first.Content[0].Name != "mcp__tatara__report_internal_issue" ||
		string(first.Content[0].Input) != `{"category":"tool_error"}` {
		t.Fatalf("first answer = %+v, want the report_internal_issue call", first)
	}
	c.answered(first, "reported", false)
	second := send(t, ts, c)
	if second.Content[0].Name != "mcp__tatara__task_get" {
		t.Fatalf("second answer = %+v, want task_get", second)
	}
	c.answered(second, []map[string]any{{"type": "text", "text": "task_get failed: no operator"}}, true)
	third := send(t, ts, c)
	if third.StopReason != "end_turn" || *third.Content[0].Text != "all done" {
		t.Fatalf("third answer = %+v, want the final say", third)
	}

	recs := recorded(t, ts, "s1")
	if len(recs) != 3 {
		t.Fatalf("recorded %d requests, want 3: %+v", len(recs), recs)
	}
	want := []string{"Bash", "mcp__tatara__report_internal_issue", "mcp__tatara__task_get"}
	if strings.Join(recs[0].Tools, ",") != strings.Join(want, ",") || len(recs[0].DeferredTools) != 0 {
		t.Errorf("recorded tools = %v deferred %v, want %v and none deferred", recs[0].Tools, recs[0].DeferredTools, want)
	}
	if recs[0].TataraSchemaTokens <= 0 || recs[0].InputTokens <= recs[0].TataraSchemaTokens {
		t.Errorf("tokens = %d input, %d tatara schemas; want both counted, schemas a part of input", recs[0].InputTokens, recs[0].TataraSchemaTokens)
	}
	if recs[2].InputTokens <= recs[0].InputTokens {
		t.Errorf("input tokens did not grow with the conversation: %d then %d", recs[0].InputTokens, recs[2].InputTokens)
	}
	if len(recs[2].ToolErrors) != 1 || !strings.HasPrefix(recs[2].ToolErrors[0], "mcp__tatara__task_get: task_get failed") {
		t.Errorf("tool errors = %v, want the failed task_get", recs[2].ToolErrors)
	}
	// Each record carries only the results its request brought: none, then each call's own.
	wantResults := [][]string{nil, {"mcp__tatara__report_internal_issue: reported"}, {"mcp__tatara__task_get: task_get failed: no operator"}}
	for i, want := range wantResults {
		if !slices.Equal(recs[i].ToolResults, want) {
			t.Errorf("record %d tool results = %q, want %q", i, recs[i].ToolResults, want)
		}
	}
}

func TestToolSearchLoadsEachToolBeforeItsCall(t *testing.T) {
	ts := newTestServer(t, "k")
	tools := []map[string]any{schemaTool("Bash"), schemaTool("ToolSearch"),
		{"name": "DeferredToolPlaceholder", "input_schema": map[string]any{"type": "object"}, "defer_loading": true}}
	system := "# Environment\n" + deferredListIntro + ". Use ToolSearch:\nWebFetch\nmcp__tatara__report_internal_issue\nmcp__tatara__task_get\n\nMore text."
	c := newConversation(script, tools, system)

	search := send(t, ts, c)
	if search.Content[0].Name != "ToolSearch" || !strings.Contains(string(search.Content[0].Input), `"select:mcp__tatara__report_internal_issue"`) {
		t.Fatalf("first answer = %+v, want a ToolSearch select of report_internal_issue", search)
	}
	// The CLI answers with a tool_reference and sends the schema, deferred, from then on.
	c.tools = append(c.tools, map[string]any{"name": "mcp__tatara__report_internal_issue", "description": "report",
		"input_schema": map[string]any{"type": "object"}, "defer_loading": true})
	c.answered(search, []map[string]any{{"type": "tool_reference", "tool_name": "mcp__tatara__report_internal_issue"}}, false)
	call := send(t, ts, c)
	if call.Content[0].Name != "mcp__tatara__report_internal_issue" {
		t.Fatalf("answer after the search = %+v, want the call", call)
	}

	recs := recorded(t, ts, "s1")
	wantDeferred := "DeferredToolPlaceholder,WebFetch,mcp__tatara__report_internal_issue,mcp__tatara__task_get"
	if got := strings.Join(recs[0].DeferredTools, ","); got != wantDeferred {
		t.Errorf("deferred tools = %s, want %s", got, wantDeferred)
	}
	if recs[0].TataraSchemaTokens != 0 || recs[1].TataraSchemaTokens <= 0 {
		t.Errorf("tatara schema tokens = %d then %d; want 0 before the search and the loaded schema after", recs[0].TataraSchemaTokens, recs[1].TataraSchemaTokens)
	}
}

func TestAToolNotOfferedStopsTheScript(t *testing.T) {
	ts := newTestServer(t, "k")
	c := newConversation("tatara-model-script id=s2\ncall pr_outcome {}", []map[string]any{schemaTool("Bash")}, "")
	m := send(t, ts, c)
	if m.StopReason != "end_turn" || !strings.Contains(*m.Content[0].Text, "mcp__tatara__pr_outcome was not offered") {
		t.Fatalf("answer = %+v, want a final text naming the missing tool", m)
	}
	if recs := recorded(t, ts, "s2"); len(recs) != 1 || !strings.Contains(recs[0].Error, "not offered") {
		t.Errorf("records = %+v, want the error recorded", recs)
	}
}

func TestStreamedToolUse(t *testing.T) {
	ts := newTestServer(t, "k")
	c := newConversation(script, []map[string]any{schemaTool("mcp__tatara__report_internal_issue")}, "")
	resp := post(t, ts.URL+"/v1/messages", "k", c.body(true))
	if ct := resp.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	var partial strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(resp.body))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			partial.WriteString(ev.Delta.PartialJSON)
		}
	}
	want := "message_start,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(events, ",") != want {
		t.Errorf("events = %v, want %s", events, want)
	}
	if partial.String() != `{"category":"tool_error"}` {
		t.Errorf("streamed input = %q", partial.String())
	}
}

func TestRequestsThatAreRefused(t *testing.T) {
	ts := newTestServer(t, "secret")
	ok := newConversation(script, nil, "").body(false)
	tests := []struct {
		name, path, key, body string
		code                  int
		wantMsg               string
	}{
		{"wrong key", "/v1/messages", "nope", ok, http.StatusUnauthorized, "invalid x-api-key"},
		{"not JSON", "/v1/messages", "secret", "{", http.StatusBadRequest, "is not a Messages API request"},
		{"no messages", "/v1/messages", "secret", `{"model":"m","messages":[]}`, http.StatusBadRequest, "messages: at least one message"},
		{"too large", "/v1/messages", "secret", `{"x":"` + strings.Repeat("a", MaxRequestBytes) + `"}`, http.StatusRequestEntityTooLarge, "over the 33554432-byte limit"},
		{"unknown route", "/v1/complete", "secret", ok, http.StatusNotFound, "POST /v1/complete is not served"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, ts.URL+tt.path, tt.key, tt.body)
			if resp.code != tt.code || !strings.Contains(string(resp.body), tt.wantMsg) {
				t.Errorf("got %d %s, want %d with %q", resp.code, resp.body, tt.code, tt.wantMsg)
			}
		})
	}
}

func TestCountTokensAgreesWithTheRecord(t *testing.T) {
	ts := newTestServer(t, "")
	c := newConversation(script, []map[string]any{schemaTool("mcp__tatara__task_get")}, "")
	resp := post(t, ts.URL+"/v1/messages/count_tokens", "", c.body(false))
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatal(err)
	}
	recs := recorded(t, ts, "s1")
	if len(recs) != 1 || recs[0].Endpoint != "count_tokens" || got.InputTokens != recs[0].InputTokens || got.InputTokens <= 0 {
		t.Errorf("count_tokens = %d, records %+v; want the recorded count, > 0", got.InputTokens, recs)
	}
}
