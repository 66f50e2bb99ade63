package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"tatara.dev/cli/internal/catalog"
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
	{"code_dependents", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/dependents?entity=e&repo=r", ""},
	{"code_dependencies", `{"repo":"r","entity":"e","depth":1}`, "memory", "GET /code-graph/dependencies?depth=1&entity=e&repo=r", ""},
	{"code_file_imports", `{"repo":"r","path":"a/b.go"}`, "memory", "GET /code-graph/file-imports?path=a%2Fb.go&repo=r", ""},
	{"code_resource_graph", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/resource-graph?entity=e&repo=r", ""},
	{"code_cross_repo", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/cross-repo?entity=e&repo=r", ""},
	{"code_path", `{"repo":"r","from":"a","to":"b"}`, "memory", "GET /code-graph/path?from=a&repo=r&to=b", ""},
	{"code_important", `{"repo":"r"}`, "memory", "GET /code-graph/important?repo=r", ""},
	{"code_important", `{"repo":"r","limit":9}`, "memory", "GET /code-graph/important?limit=9&repo=r", ""},
	{"code_stats", `{"repo":"r"}`, "memory", "GET /code-graph/stats?repo=r", ""},
	{"code_ambiguous_edges", `{"repo":"r","limit":1}`, "memory", "GET /code-graph/ambiguous-edges?limit=1&repo=r", ""},
	{"code_explain", `{"repo":"r","entity":"e"}`, "memory", "GET /code-graph/explain?entity=e&repo=r", ""},
	{"code_related", `{"repo":"r","entity":"e","limit":2}`, "memory", "GET /code-graph/related?entity=e&limit=2&repo=r", ""},
	{"code_bridges", `{"repo":"r"}`, "memory", "GET /code-graph/bridges?repo=r", ""},
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
	{"repo_list", `{}`, "operator", "GET /api/v1/projects/proj/repos", ""},
	{"task_list", `{}`, "operator", "GET /api/v1/projects/proj/tasks", ""},
	{"task_list", `{"kind":"review","phase":"Running"}`, "operator", "GET /api/v1/projects/proj/tasks?kind=review&phase=Running", ""},
	{"task_note", `{"text":"t"}`, "operator", "POST /api/v1/tasks/task-1/notes", `{"text":"t"}`},
	{"subtask_create", `{"kind":"review","repo":"r","directive":"d"}`, "operator", "POST /api/v1/tasks/task-1/subtasks", `{"directive":"d","kind":"review","repo":"r"}`},
	{"subtask_list", `{}`, "operator", "GET /api/v1/tasks/task-1/subtasks", ""},
	{"subtask_get", `{"subtask":"s1"}`, "operator", "GET /api/v1/tasks/task-1/subtasks/s1", ""},
	{"subtask_cancel", `{"subtask":"s1","reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/subtasks/s1/cancel", `{"reason":"r"}`},
	{"comment", `{"body":"b"}`, "operator", "POST /api/v1/tasks/task-1/comments", `{"body":"b"}`},
	{"comment_on_issue", `{"issue":12,"body":"b"}`, "operator", "POST /api/v1/tasks/task-1/issue-comments", `{"body":"b","issue":12}`},
	{"comment_on_issue", `{"issue":"12","body":"b","repo":"r"}`, "operator", "POST /api/v1/tasks/task-1/issue-comments", `{"body":"b","issue":12,"repo":"r"}`},
	{"propose_issue", `{"title":"t","body":"b"}`, "operator", "POST /api/v1/tasks/task-1/proposals", `{"body":"b","title":"t"}`},
	{"propose_issue", `{"title":"t","body":"b","repo":"r"}`, "operator", "POST /api/v1/tasks/task-1/proposals", `{"body":"b","repo":"r","title":"t"}`},
	{"proposal_list", `{}`, "operator", "GET /api/v1/projects/proj/proposals", ""},
	{"skip_research", `{"reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/intents/skip_research", `{"reason":"r"}`},
	{"change_summary", `{"summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/change_summary", `{"summary":"s"}`},
	{"pr_outcome", `{"outcome":"opened"}`, "operator", "POST /api/v1/tasks/task-1/intents/pr_outcome", `{"outcome":"opened"}`},
	{"pr_outcome", `{"outcome":"merged","url":"u","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/pr_outcome", `{"outcome":"merged","summary":"s","url":"u"}`},
	{"review_verdict", `{"verdict":"approve","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/review_verdict", `{"summary":"s","verdict":"approve"}`},
	{"issue_outcome", `{"outcome":"duplicate","summary":"s"}`, "operator", "POST /api/v1/tasks/task-1/intents/issue_outcome", `{"outcome":"duplicate","summary":"s"}`},
	{"decline_implementation", `{"reason":"r"}`, "operator", "POST /api/v1/tasks/task-1/intents/decline_implementation", `{"reason":"r"}`},
	{"already_done", `{"evidence":"e"}`, "operator", "POST /api/v1/tasks/task-1/intents/already_done", `{"evidence":"e"}`},
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
	covered := map[string]bool{}
	for _, c := range contracts {
		covered[c.tool] = true
		t.Run(c.tool+" "+c.args, func(t *testing.T) {
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
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
			wantAuth := ""
			if c.backend == "operator" {
				wantAuth = "Bearer secret-token"
			}
			if got.Auth != wantAuth {
				t.Errorf("Authorization = %q, want %q (the token goes to the operator only)", got.Auth, wantAuth)
			}
		})
	}
	for _, tool := range catalog.All() {
		if tool.Target != catalog.TargetLocal && !covered[tool.Name] {
			t.Errorf("backend tool %s has no contract row", tool.Name)
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
