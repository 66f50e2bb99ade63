package transcript

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realTranscript was written by the real agent CLI (Claude Code 2.1.328) in one print-mode run
// against the scripted model (e2e/internal/model): the model called report_internal_issue
// {tool_error, warn}, then task_get, whose result was an error (no Task in the environment), then
// answered "all done".
const (
	realTranscript        = "testdata/claude-2.1.328.jsonl"
	realTranscriptSession = "5258afcf-5c4c-4501-8a64-de145d666886"
)

// TestRealTranscript tails the real file from the agent CLI's own directory layout: every record
// type it writes is known, nothing is malformed, and the report is seen once.
func TestRealTranscript(t *testing.T) {
	data, err := os.ReadFile(realTranscript)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	path := filepath.Join(root, "projects", "-tmp-probe-wd", realTranscriptSession+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &logCapture{}
	issues := &fakeIssueCounter{}
	tl := New(root, realTranscriptSession, WithLogger(c.logger()), WithInternalIssueCounter(issues))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains the file written so far, then returns.
	tl.Run(ctx)

	types := c.eventTypes(t)
	for _, typ := range types {
		if typ == labelOther || typ == labelMalformed {
			t.Errorf("event type %q in a real transcript; all types: %v", typ, types)
			break
		}
	}
	for _, want := range []string{"api-request", "api-request-blob", "api-request-shape", "atis-latch", "tools-used", "last-prompt", "cost-state"} {
		if !strings.Contains(","+strings.Join(types, ",")+",", ","+want+",") {
			t.Errorf("no %s event; the fixture has that record type (events: %v)", want, types)
		}
	}
	s := tl.Summary()
	if s.Lines != int64(strings.Count(string(data), "\n")) || s.Malformed != 0 || s.ToolUses != 2 || s.ToolErrors != 1 || s.InternalIssues != 1 {
		t.Errorf("summary = %+v, want every line read, 2 tool uses, 1 tool error, 1 internal issue, none malformed", s)
	}
	if got := strings.Join(flatten(issues.calls), ";"); got != "tool_error/warn" {
		t.Errorf("internal issue labels = %q, want tool_error/warn", got)
	}
	if n := len(c.records(t, "internal issue reported by agent")); n > 1 {
		t.Errorf("%d internal issue log lines, want at most one", n)
	}
}

// TestNoDuplicateLogKeys: a line names its session once, even when the caller's logger already
// carries other attributes (slog keeps duplicate keys, which JSON readers then disagree on).
func TestNoDuplicateLogKeys(t *testing.T) {
	c := &logCapture{}
	tl := New(t.TempDir(), testSession, WithLogger(c.logger().With("task", "t1")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl.Run(ctx) // no transcript: the tailer warns
	lines := c.records(t, "no transcript found for the session")
	if len(lines) != 1 {
		t.Fatalf("want one 'no transcript found' line, got %d: %s", len(lines), c.text())
	}
	for _, l := range strings.Split(strings.TrimSpace(c.text()), "\n") {
		if n := strings.Count(l, `"session_id":`); n != 1 {
			t.Errorf("log line has %d session_id keys, want 1: %s", n, l)
		}
	}
}

func flatten(calls [][]string) []string {
	var out []string
	for _, c := range calls {
		out = append(out, strings.Join(c, "/"))
	}
	return out
}
