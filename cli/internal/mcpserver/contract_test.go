package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/tasktoken"
)

// contract is what one backend tool must send: the external services (memory, chat) and this
// repository's operator REST API are specified here, request by request.
type contract struct {
	tool, args string
	backend    string
	request    string // "METHOD /path?query"
	body       string // JSON, "" for none
}

var contracts = []contract{
	// memory
	{"create_memory", `{"content":"c"}`, "memory", "POST /memories", `{"content":"c"}`},
	{"create_memory", `{"content":"c","repo":"r","topic":"t"}`, "memory", "POST /memories", `{"content":"c","repo":"r","topic":"t"}`},
	{"get_memory", `{"id":"m 1"}`, "memory", "GET /memories/m%201", ""},
	{"update_memory", `{"id":"m1"}`, "memory", "PATCH /memories/m1", ""},
	{"update_memory", `{"id":"m1","content":"c","topic":"t"}`, "memory", "PATCH /memories/m1", `{"content":"c","topic":"t"}`},
	{"delete_memory", `{"id":"m1"}`, "memory", "DELETE /memories/m1", ""},
	{"list_memories", `{}`, "memory", "GET /memories", ""},
	{"list_memories", `{"repo":"r","topic":"t","limit":5}`, "memory", "GET /memories?limit=5&repo=r&topic=t", ""},
	{"search_memories", `{"query":"how & why"}`, "memory", "GET /memories/search?query=how+%26+why", ""},
	{"search_memories", `{"query":"q","repo":"r","limit":3}`, "memory", "GET /memories/search?limit=3&query=q&repo=r", ""},
	{"create_entity", `{"name":"n","type":"service"}`, "memory", "POST /entities", `{"name":"n","type":"service"}`},
	{"create_entity", `{"name":"n","type":"service","description":"d"}`, "memory", "POST /entities", `{"description":"d","name":"n","type":"service"}`},
	{"get_entity", `{"id":"e1"}`, "memory", "GET /entities/e1", ""},
	{"update_entity", `{"id":"e1","name":"n","type":"t","description":"d"}`, "memory", "PATCH /entities/e1", `{"description":"d","name":"n","type":"t"}`},
	{"delete_entity", `{"id":"e1"}`, "memory", "DELETE /entities/e1", ""},
	{"search_entities", `{"query":"q"}`, "memory", "GET /entities/search?query=q", ""},
	{"search_entities", `{"query":"q","type":"service","limit":2}`, "memory", "GET /entities/search?limit=2&query=q&type=service", ""},
	{"create_edge", `{"from":"a","to":"b","relation":"depends_on"}`, "memory", "POST /edges", `{"from":"a","relation":"depends_on","to":"b"}`},
	{"delete_edge", `{"id":"x1"}`, "memory", "DELETE /edges/x1", ""},
	// code graph
	{"code_search", `{"repo":"r","query":"q"}`, "memory", "GET /code-graph/search?query=q&repo=r", ""},
	{"code_search", `{"repo":"r","query":"q","kind":"function","limit":4}`, "memory", "GET /code-graph/search?kind=function&limit=4&query=q&repo=r", ""},
	{"code_entity", `{"repo":"r","entity":"pkg.F"}`, "memory", "GET /code-graph/entity?entity=pkg.F&repo=r", ""},
	{"code_neighbors", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/neighbors?entity=e&repo=r", ""},
	{"code_neighbors", `{"repo":"r","entity":"e","depth":2}`, "memory", "GET /code-graph/neighbors?depth=2&entity=e&repo=r", ""},
	{"code_callers", `{"repo":"r","entity":"e","depth":3}`, "memory", "GET /code-graph/callers?depth=3&entity=e&repo=r", ""},
	{"code_callees", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/callees?entity=e&repo=r", ""},
	{"code_callees", `{"repo":"r","entity":"e","depth":2}`, "memory", "GET /code-graph/callees?depth=2&entity=e&repo=r", ""},
	{"code_dependents", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/dependents?entity=e&repo=r", ""},
	{"code_dependents", `{"repo":"r","entity":"e","depth":4}`, "memory", "GET /code-graph/dependents?depth=4&entity=e&repo=r", ""},
	{"code_dependencies", `{"repo":"r","entity":"e","depth":1}`, "memory", "GET /code-graph/dependencies?depth=1&entity=e&repo=r", ""},
	{"code_file_imports", `{"repo":"r","path":"a/b.go"}`, "memory", "GET /code-graph/file-imports?path=a%2Fb.go&repo=r", ""},
	{"code_resource_graph", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/resource-graph?entity=e&repo=r", ""},
	{"code_resource_graph", `{"repo":"r","entity":"e","depth":2}`, "memory", "GET /code-graph/resource-graph?depth=2&entity=e&repo=r", ""},
	{"code_cross_repo", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/cross-repo?entity=e&repo=r", ""},
	{"code_path", `{"repo":"r","from":"a","to":"b"}`, "memory", "GET /code-graph/path?from=a&repo=r&to=b", ""},
	{"code_important", `{"repo":"r"}`, "memory", "GET /code-graph/important?repo=r", ""},
	{"code_important", `{"repo":"r","limit":9}`, "memory", "GET /code-graph/important?limit=9&repo=r", ""},
	{"code_stats", `{"repo":"r"}`, "memory", "GET /code-graph/stats?repo=r", ""},
	{"code_ambiguous_edges", `{"repo":"r","limit":1}`, "memory", "GET /code-graph/ambiguous-edges?limit=1&repo=r", ""},
	{"code_explain", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/explain?entity=e&repo=r", ""},
	{"code_related", `{"repo":"r","entity":"e","limit":2}`, "memory", "GET /code-graph/related?entity=e&limit=2&repo=r", ""},
	{"code_bridges", `{"repo":"r"}`, "memory", "GET /code-graph/bridges?repo=r", ""},
	{"code_bridges", `{"repo":"r","limit":6}`, "memory", "GET /code-graph/bridges?limit=6&repo=r", ""},
	{"code_communities", `{"repo":"r"}`, "memory", "GET /code-graph/communities?repo=r", ""},
	{"code_communities", `{"repo":"r","community":3}`, "memory", "GET /code-graph/community?community=3&repo=r", ""},
	{"code_communities", `{"repo":"r","community":"x"}`, "memory", "GET /code-graph/communities?repo=r", ""},
	{"code_hyperedges", `{"repo":"r"}`, "memory", "GET /code-graph/hyperedges?repo=r", ""},
	{"code_hyperedges", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/hyperedges?entity=e&repo=r", ""},
	{"code_hyperedges", `{"repo":"r","id":"h","entity":"e"}`, "memory", "GET /code-graph/hyperedge?id=h&repo=r", ""},
	// operator: task and project default to the pod's own
	{"task_get", `{}`, "operator", "GET /api/v1/tasks/task-1", ""},
	{"task_get", `{"task":"other"}`, "operator", "GET /api/v1/tasks/other", ""},
	{"project_get", `{}`, "operator", "GET /api/v1/projects/proj", ""},
	{"project_get", `{"project":"p2"}`, "operator", "GET /api/v1/projects/p2", ""},
	{"repo_list", `{}`, "operator", "GET /api/v1/projects/proj/repos", ""},
	{"repo_list", `{"project":"p2"}`, "operator", "GET /api/v1/projects/p2/repos", ""},
	{"task_list", `{}`, "operator", "GET /api/v1/projects/proj/tasks", ""},
	{"task_list", `{"kind":"review","phase":"Running"}`, "operator", "GET /api/v1/projects/proj/tasks?kind=review&phase=Running", ""},
	{"task_list", `{"project":"p2","phase":"Succeeded"}`, "operator", "GET /api/v1/projects/p2/tasks?phase=Succeeded", ""},
	{"task_note", `{"text":"t"}`, "operator", "POST /api/v1/tasks/task-1/notes", `{"text":"t"}`},
	{"task_note", `{"task":"t2","text":"t"}`, "operator", "POST /api/v1/tasks/t2/notes", `{"text":"t"}`},
	{"subtask_create", `{"kind":"review","repo":"r","directive":"d"}`, "operator", "POST /api/v1/tasks/task-1/subtasks", `{"directive":"d","kind":"review","repo":"r"}`},
	{"subtask_create", `{"task":"t2","kind":"implement","repo":"r","directive":"d"}`, "operator", "POST /api/v1/tasks/t2/subtasks", `{"directive":"d","kind":"implement","repo":"r"}`},
	{"subtask_create", `{"kind":"review","repo":"r","directive":"review my branch","ref":"tatara/task-1"}`, "operator", "POST /api/v1/tasks/task-1/subtasks", `{"directive":"review my branch","kind":"review","ref":"tatara/task-1","repo":"r"}`},
	{"subtask_list", `{}`, "operator", "GET /api/v1/tasks/task-1/subtasks", ""},
	{"subtask_list", `{"task":"t2"}`, "operator", "GET /api/v1/tasks/t2/subtasks", ""},
	{"subtask_get", `{"subtask":"s1"}`, "operator", "GET /api/v1/tasks/task-1/subtasks/s1", ""},
	{"subtask_get", `{"task":"t2","subtask":"s1"}`, "operator", "GET /api/v1/tasks/t2/subtasks/s1", ""},
	{"subtask_cancel", `{"subtask":"s1","reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/subtasks/s1/cancel", `{"reason":"r"}`},
	{"subtask_cancel", `{"task":"t2","subtask":"s1","reason":"r"}`, "operator", "POST /api/v1/tasks/t2/subtasks/s1/cancel", `{"reason":"r"}`},
	{"comment", `{"body":"b"}`, "operator", "POST /api/v1/tasks/task-1/comments", `{"body":"b"}`},
	{"comment", `{"task":"t2","body":"b"}`, "operator", "POST /api/v1/tasks/t2/comments", `{"body":"b"}`},
	{"comment_on_issue", `{"issue":12,"body":"b"}`, "operator", "POST /api/v1/tasks/task-1/issue-comments", `{"body":"b","issue":12}`},
	{"comment_on_issue", `{"issue":"12","body":"b","repo":"r"}`, "operator", "POST /api/v1/tasks/task-1/issue-comments", `{"body":"b","issue":12,"repo":"r"}`},
	{"comment_on_issue", `{"task":"t2","issue":3,"body":"b"}`, "operator", "POST /api/v1/tasks/t2/issue-comments", `{"body":"b","issue":3}`},
	{"propose_issue", `{"title":"t","body":"b"}`, "operator", "POST /api/v1/tasks/task-1/proposals", `{"body":"b","title":"t"}`},
	{"propose_issue", `{"title":"t","body":"b","repo":"r"}`, "operator", "POST /api/v1/tasks/task-1/proposals", `{"body":"b","repo":"r","title":"t"}`},
	{"propose_issue", `{"task":"t2","title":"t","body":"b"}`, "operator", "POST /api/v1/tasks/t2/proposals", `{"body":"b","title":"t"}`},
	{"proposal_list", `{}`, "operator", "GET /api/v1/projects/proj/proposals", ""},
	{"proposal_list", `{"project":"p2"}`, "operator", "GET /api/v1/projects/p2/proposals", ""},
	{"skip_research", `{"reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/intents/skip_research", `{"reason":"r"}`},
	{"skip_research", `{"task":"t2","reason":"r"}`, "operator", "POST /api/v1/tasks/t2/intents/skip_research", `{"reason":"r"}`},
	{"change_summary", `{"summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/change_summary", `{"summary":"s"}`},
	{"change_summary", `{"task":"t2","summary":"s"}`, "operator", "POST /api/v1/tasks/t2/intents/change_summary", `{"summary":"s"}`},
	{"pr_outcome", `{"outcome":"opened"}`, "operator", "POST /api/v1/tasks/task-1/intents/pr_outcome", `{"outcome":"opened"}`},
	{"pr_outcome", `{"outcome":"merged","url":"u","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/pr_outcome", `{"outcome":"merged","summary":"s","url":"u"}`},
	{"pr_outcome", `{"task":"t2","outcome":"failed"}`, "operator", "POST /api/v1/tasks/t2/intents/pr_outcome", `{"outcome":"failed"}`},
	{"review_verdict", `{"verdict":"approve","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/review_verdict", `{"summary":"s","verdict":"approve"}`},
	{"review_verdict", `{"task":"t2","verdict":"request_changes","summary":"s"}`, "operator", "POST /api/v1/tasks/t2/intents/review_verdict", `{"summary":"s","verdict":"request_changes"}`},
	{"issue_outcome", `{"outcome":"duplicate","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/issue_outcome", `{"outcome":"duplicate","summary":"s"}`},
	{"issue_outcome", `{"task":"t2","outcome":"fixed","summary":"s"}`, "operator", "POST /api/v1/tasks/t2/intents/issue_outcome", `{"outcome":"fixed","summary":"s"}`},
	{"decline_implementation", `{"reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/intents/decline_implementation", `{"reason":"r"}`},
	{"decline_implementation", `{"task":"t2","reason":"r"}`, "operator", "POST /api/v1/tasks/t2/intents/decline_implementation", `{"reason":"r"}`},
	{"already_done", `{"evidence":"e"}`, "operator", "POST /api/v1/tasks/task-1/intents/already_done", `{"evidence":"e"}`},
	{"already_done", `{"task":"t2","evidence":"e"}`, "operator", "POST /api/v1/tasks/t2/intents/already_done", `{"evidence":"e"}`},
	// chat
	{"chat_list_rooms", `{}`, "chat", "GET /rooms", ""},
	{"chat_list_rooms", `{"state":"closed"}`, "chat", "GET /rooms?state=closed", ""},
	{"chat_get_room", `{"room":"r1"}`, "chat", "GET /rooms/r1", ""},
	{"chat_create_room", `{"name":"n"}`, "chat", "POST /rooms", `{"name":"n"}`},
	{"chat_create_room", `{"name":"n","topic":"t"}`, "chat", "POST /rooms", `{"name":"n","topic":"t"}`},
	{"chat_join_room", `{"room":"r1"}`, "chat", "POST /rooms/r1/join", ""},
	{"chat_leave_room", `{"room":"r1"}`, "chat", "POST /rooms/r1/leave", ""},
	{"chat_close_room", `{"room":"r1"}`, "chat", "POST /rooms/r1/close", ""},
	{"chat_close_room", `{"room":"r1","reason":"done"}`, "chat", "POST /rooms/r1/close", `{"reason":"done"}`},
	{"chat_list_members", `{"room":"r1"}`, "chat", "GET /rooms/r1/members", ""},
	{"chat_post_message", `{"room":"r1","text":"hi"}`, "chat", "POST /rooms/r1/messages", `{"text":"hi"}`},
	{"chat_read_messages", `{"room":"r1"}`, "chat", "GET /rooms/r1/messages", ""},
	{"chat_read_messages", `{"room":"r1","after":"c9","limit":10}`, "chat", "GET /rooms/r1/messages?after=c9&limit=10", ""},
	{"chat_wait_messages", `{"room":"r1","after":"c9","timeout_seconds":30}`, "chat", "GET /rooms/r1/messages/wait?after=c9&timeout_seconds=30", ""},
}

// TestBackendContracts calls every backend tool through a real MCP client and checks the
// request the backend received.
func TestBackendContracts(t *testing.T) {
	h := newHarness(t, "")
	covered := map[string]map[string]bool{} // tool -> argument names some row sends
	for _, c := range contracts {
		var args map[string]any
		if err := json.Unmarshal([]byte(c.args), &args); err != nil {
			t.Fatalf("%s: bad args %s: %v", c.tool, c.args, err)
		}
		if covered[c.tool] == nil {
			covered[c.tool] = map[string]bool{}
		}
		for name := range args {
			covered[c.tool][name] = true
		}
		t.Run(c.tool+" "+c.args, func(t *testing.T) {
			res := h.call(t, c.tool, args)
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			seen := h.backend.take()
			if len(seen) != 1 {
				t.Fatalf("backend saw %d requests, want 1: %+v", len(seen), seen)
			}
			got := seen[0]
			if got.Backend != c.backend || got.Method+" "+got.URI != c.request {
				t.Errorf("request = %s %s %s, want %s %s", got.Backend, got.Method, got.URI, c.backend, c.request)
			}
			if !jsonEqual(got.Body, c.body) {
				t.Errorf("body = %s, want %s", got.Body, c.body)
			}
			// The operator gets the Task token; memory and chat each a token bound to them, which
			// they review with the operator, and never the Task token itself.
			want := "Bearer secret-token"
			if got.Backend != string(catalog.TargetOperator) {
				want = "Bearer " + tasktoken.ForAudience("secret-token", got.Backend)
			}
			if got.Auth != want {
				t.Errorf("Authorization = %q, want %q", got.Auth, want)
			}
		})
	}
	// Every argument of every backend tool, optional ones and the defaulted task/project included,
	// is sent by at least one row: an argument that never reaches the wire is a silent drop.
	for _, tool := range catalog.All() {
		if tool.Target == catalog.TargetLocal {
			continue
		}
		if covered[tool.Name] == nil {
			t.Errorf("backend tool %s has no contract row", tool.Name)
			continue
		}
		for _, a := range tool.Args {
			if !covered[tool.Name][a.Name] {
				t.Errorf("no contract row of %s sends argument %q", tool.Name, a.Name)
			}
		}
	}
}

func jsonEqual(a, b string) bool {
	if strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// The schemas a client sees and what the server accepts agree: every inputSchema closes its
// properties (additionalProperties: false) and the server refuses an undeclared property.
func TestInputSchemasAreClosed(t *testing.T) {
	h := newHarness(t, "")
	res, err := h.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(catalog.All()) {
		t.Fatalf("tools/list = %d tools, want %d", len(res.Tools), len(catalog.All()))
	}
	for _, tool := range res.Tools {
		t.Run(tool.Name, func(t *testing.T) {
			var schema map[string]any
			raw, _ := json.Marshal(tool.InputSchema)
			if err := json.Unmarshal(raw, &schema); err != nil {
				t.Fatal(err)
			}
			if ap, ok := schema["additionalProperties"]; !ok || ap != false {
				t.Errorf("inputSchema additionalProperties = %v (present=%t), want false: %s", ap, ok, raw)
			}
			args := validArgs(t, tool.Name)
			args["not_declared"] = "x"
			call := h.call(t, tool.Name, args)
			if !call.IsError || !strings.Contains(resultText(call), `"not_declared": is not an argument of `+tool.Name) {
				t.Errorf("an undeclared property: isError=%t %q", call.IsError, resultText(call))
			}
			if seen := h.backend.take(); len(seen) != 0 {
				t.Errorf("an undeclared property reached the backend: %+v", seen)
			}
		})
	}
}

// validArgs returns a valid call's arguments: the tool's first contract row, or for the local
// report_internal_issue a minimal report.
func validArgs(t *testing.T, tool string) map[string]any {
	t.Helper()
	if tool == catalog.ReportInternalIssue {
		return map[string]any{"category": "other", "description": "d"}
	}
	for _, c := range contracts {
		if c.tool == tool {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			return args
		}
	}
	t.Fatalf("no contract row for %s", tool)
	return nil
}
