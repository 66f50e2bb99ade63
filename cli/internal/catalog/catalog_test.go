package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// TestCatalogInvariants loops over every tool: what a model needs to use it without guessing.
func TestCatalogInvariants(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range All() {
		t.Run(tool.Name, func(t *testing.T) {
			if seen[tool.Name] {
				t.Fatalf("duplicate tool name %q", tool.Name)
			}
			seen[tool.Name] = true
			if !snakeCase.MatchString(tool.Name) {
				t.Errorf("name %q is not snake_case", tool.Name)
			}
			if len(tool.Description) < 20 || !strings.HasSuffix(tool.Description, ".") {
				t.Errorf("description %q is too short or not a sentence", tool.Description)
			}
			if tool.Group == "" || tool.Target == "" {
				t.Errorf("group %q / target %q must be set", tool.Group, tool.Target)
			}
			if (tool.Target == TargetLocal) != (tool.Handler != nil) {
				t.Errorf("target %q with handler=%t: local tools, and only they, have a Handler", tool.Target, tool.Handler != nil)
			}
			if tool.Target != TargetLocal && (tool.Method == "" || !strings.HasPrefix(tool.Path, "/")) {
				t.Errorf("backend tool needs a method and an absolute path, got %q %q", tool.Method, tool.Path)
			}
			if tool.Hints.ReadOnly && (tool.Method != http.MethodGet || tool.Hints.Destructive) {
				t.Errorf("read-only hint on %s %s (destructive=%t)", tool.Method, tool.Path, tool.Hints.Destructive)
			}
			if tool.Method == http.MethodDelete && !tool.Hints.Destructive {
				t.Errorf("DELETE must carry the destructive hint")
			}
			args := map[string]bool{}
			for _, a := range tool.Args {
				if args[a.Name] {
					t.Errorf("duplicate argument %q", a.Name)
				}
				args[a.Name] = true
				if a.Description == "" || a.Type == "" {
					t.Errorf("argument %q needs a type and a description", a.Name)
				}
				if a.In == InPath && !strings.Contains(tool.Path, "{"+a.Name+"}") {
					t.Errorf("path argument %q is not in path %q", a.Name, tool.Path)
				}
			}
			for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(tool.Path, -1) {
				if !args[m[1]] {
					t.Errorf("path %q uses {%s} but the tool has no such argument", tool.Path, m[1])
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		tool    string
		args    map[string]any
		wantArg string // "" = valid
		wantMsg string
	}{
		{"code_search", map[string]any{"repo": "r", "query": "q"}, "", ""},
		{"code_search", map[string]any{"query": "q"}, "repo", "is required"},
		{"code_search", map[string]any{"repo": "", "query": "q"}, "repo", "must not be empty"},
		{"code_search", map[string]any{"repo": 3.0, "query": "q"}, "repo", "must be a string"},
		{"code_search", map[string]any{"repo": "r", "query": "q", "limit": "ten"}, "limit", "must be an integer"},
		{"code_search", map[string]any{"repo": "r", "query": "q", "limit": 1.5}, "limit", "must be an integer"},
		{"code_search", map[string]any{"repo": "r", "query": "q", "limt": 3.0}, "limt", "is not an argument of code_search"},
		{"code_communities", map[string]any{"repo": "r", "community": "abc"}, "", ""},
		{"task_get", map[string]any{}, "task", "TATARA_TASK"},
		{"pr_outcome", map[string]any{"task": "t", "outcome": "shipped"}, "outcome", "must be one of opened, merged, closed, failed"},
		{"comment_on_issue", map[string]any{"task": "t", "issue": "12", "body": "b"}, "", ""},
		{"report_internal_issue", map[string]any{"category": "auth", "description": ""}, "description", "must not be empty"},
		{"report_internal_issue", map[string]any{"category": "nope", "description": "d"}, "category", "must be one of"},
		{"report_internal_issue", map[string]any{"category": "auth", "severity": "fatal", "description": "d"}, "severity", "must be one of"},
		{"report_internal_issue", map[string]any{"category": "auth", "severity": "", "description": "d"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"/"+tt.wantArg+tt.wantMsg, func(t *testing.T) {
			tool, ok := ByName(tt.tool)
			if !ok {
				t.Fatalf("no tool %q", tt.tool)
			}
			err := tool.Validate(tt.args)
			if tt.wantArg == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var argErr *ArgError
			if !errors.As(err, &argErr) || argErr.Arg != tt.wantArg || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Validate() = %v, want an error on %q containing %q", err, tt.wantArg, tt.wantMsg)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	tool, _ := ByName("task_note")
	ctx := map[string]string{EnvTask: "own-task", EnvProject: "p"}
	tests := []struct {
		name string
		task any // the agent's value; absent when nil and omit is set
		omit bool
		want any
	}{
		{name: "absent: the pod's own", omit: true, want: "own-task"},
		{name: "null: the pod's own", task: nil, want: "own-task"},
		{name: "empty: the pod's own", task: "", want: "own-task"},
		{name: "explicit wins", task: "other", want: "other"},
		// A wrong type is kept so that Validate refuses it by name.
		{name: "number kept", task: 12345.0, want: 12345.0},
		{name: "bool kept", task: false, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"text": "hi"}
			if !tt.omit {
				args["task"] = tt.task
			}
			if got := tool.WithDefaults(args, ctx)["task"]; got != tt.want {
				t.Errorf("task = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Part B: the merged code-graph tools pick their route from the arguments.
func TestMergedCodeGraphRoutes(t *testing.T) {
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"code_communities", map[string]any{"repo": "r"}, "GET /code-graph/communities?repo=r"},
		{"code_communities", map[string]any{"repo": "r", "community": 3.0}, "GET /code-graph/community?community=3&repo=r"},
		{"code_communities", map[string]any{"repo": "r", "community": "7"}, "GET /code-graph/community?community=7&repo=r"},
		{"code_communities", map[string]any{"repo": "r", "community": "abc"}, "GET /code-graph/communities?repo=r"},
		{"code_communities", map[string]any{"repo": "r", "community": 2.5}, "GET /code-graph/communities?repo=r"},
		{"code_communities", map[string]any{"repo": "r", "community": -1.0}, "GET /code-graph/communities?repo=r"},
		{"code_hyperedges", map[string]any{"repo": "r"}, "GET /code-graph/hyperedges?repo=r"},
		{"code_hyperedges", map[string]any{"repo": "r", "entity": "pkg.F"}, "GET /code-graph/hyperedges?entity=pkg.F&repo=r"},
		{"code_hyperedges", map[string]any{"repo": "r", "id": "h"}, "GET /code-graph/hyperedge?id=h&repo=r"},
		{"code_hyperedges", map[string]any{"repo": "r", "id": "h", "entity": "pkg.F"}, "GET /code-graph/hyperedge?id=h&repo=r"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			tool, _ := ByName(tt.tool)
			if err := tool.Validate(tt.args); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			req, err := tool.BuildRequest(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Method + " " + req.Path + "?" + req.Query.Encode(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReportInternalIssueHandler(t *testing.T) {
	tests := []struct {
		name      string
		args      map[string]any
		wantErr   string
		wantLevel slog.Level
		wantSev   string
	}{
		{"error severity", map[string]any{"category": "tool_error", "severity": "error", "description": "boom", "offending_tool": "code_search", "resource_id": "r1"}, "", slog.LevelError, "error"},
		{"warn severity", map[string]any{"category": "workspace_broken", "severity": "warn", "description": "slow"}, "", slog.LevelWarn, "warn"},
		{"severity defaults to error", map[string]any{"category": "auth", "description": "401"}, "", slog.LevelError, "error"},
		{"empty severity defaults to error", map[string]any{"category": "auth", "severity": "", "description": "401"}, "", slog.LevelError, "error"},
		{"empty description", map[string]any{"category": "auth", "description": "  "}, `argument "description": must not be empty`, 0, ""},
		{"missing description", map[string]any{"category": "auth"}, `argument "description": must not be empty`, 0, ""},
		{"unknown category", map[string]any{"category": "cosmic_rays", "description": "d"}, `argument "category": must be one of`, 0, ""},
		{"unknown severity", map[string]any{"category": "other", "severity": "fatal", "description": "d"}, `argument "severity": must be one of`, 0, ""},
		{"wrong type", map[string]any{"category": "other", "description": 5.0}, `argument "description": must be a string`, 0, ""},
	}
	for _, c := range IssueCategories {
		tests = append(tests, struct {
			name      string
			args      map[string]any
			wantErr   string
			wantLevel slog.Level
			wantSev   string
		}{"category " + c, map[string]any{"category": c, "description": "d"}, "", slog.LevelError, "error"})
	}
	tool, _ := ByName(ReportInternalIssue)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var counted []string
			deps := Deps{
				Logger:         slog.New(slog.NewJSONHandler(&buf, nil)),
				Context:        map[string]string{EnvProject: "proj", EnvTask: "task-1"},
				InternalIssues: func(c, s string) { counted = append(counted, c+"/"+s) },
			}
			_, err := tool.Handler(context.Background(), deps, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if buf.Len() != 0 || len(counted) != 0 {
					t.Errorf("a rejected report must not be logged or counted: log %q, counted %v", buf.String(), counted)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("log line %q: %v", buf.String(), err)
			}
			if rec["level"] != tt.wantLevel.String() {
				t.Errorf("level = %v, want %v", rec["level"], tt.wantLevel)
			}
			for k, want := range map[string]any{"category": tt.args["category"], "severity": tt.wantSev,
				"description": tt.args["description"], "project": "proj", "task": "task-1"} {
				if rec[k] != want {
					t.Errorf("log field %s = %v, want %v", k, rec[k], want)
				}
			}
			for _, k := range []string{"offending_tool", "resource_id"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("log line lacks %s", k)
				}
			}
			if want := tt.args["category"].(string) + "/" + tt.wantSev; len(counted) != 1 || counted[0] != want {
				t.Errorf("counted %v, want [%s]", counted, want)
			}
		})
	}
}
