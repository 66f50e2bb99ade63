package transcript

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"tatara.dev/testkit/testutil"
)

// transcriptPath is where the agent CLI writes the session's transcript under root.
func transcriptPath(root string) string {
	return filepath.Join(root, "projects", "-work-repo", testSession+".jsonl")
}

// sampleTranscript returns realistic lines and the event types they must produce.
func sampleTranscript() ([]string, []string) {
	lines := []string{
		userPromptLine("implement issue 4"),
		assistantLine("msg_a", textBlock("I'll look around first.")),
		assistantLine("msg_a", toolUseBlock("toolu_1", "Bash", `{"command":"ls -la"}`)),
		toolResultLine("toolu_1", strings.Repeat("drwxr-xr-x file\n", 2000), false),
		assistantLine("msg_b", `{"type":"thinking","thinking":"`+strings.Repeat("hm ", 500)+`","signature":"s"}`),
		assistantLine("msg_b", toolUseBlock("toolu_2", internalIssueToolName, `{"category":"workspace_broken","description":"no go.mod"}`)),
		toolResultLine("toolu_2", "reported", false),
		`{"type":"system","subtype":"compact_boundary","uuid":"u-sys","content":"compacted"}`,
		assistantLine("msg_c", textBlock("done")),
	}
	want := []string{"text", "text", "tool_use", "tool_result", "thinking", "tool_use", "tool_result", "system", "text"}
	return lines, want
}

// writeChunks appends data to path in random chunk sizes with short pauses, creating the file
// (and its directory) with the first chunk.
func writeChunks(t *testing.T, path string, data []byte, rng *rand.Rand) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Error(err)
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	// Small chunks split lines everywhere; a huge payload gets bigger ones so the test stays quick.
	maxChunk := max(4096, len(data)/256)
	for len(data) > 0 {
		n := min(len(data), 1+rng.IntN(maxChunk))
		if _, err := f.Write(data[:n]); err != nil {
			t.Error(err)
			return
		}
		data = data[n:]
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
	}
}

func runTailer(t *testing.T, root string, opts ...Option) (*Tailer, *logCapture, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	c := &logCapture{}
	tl := New(root, testSession, append([]Option{WithLogger(c.logger()), WithPollInterval(2 * time.Millisecond)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tl.Run(ctx) }()
	return tl, c, cancel, done
}

func TestFileRandomChunks(t *testing.T) {
	lines, want := sampleTranscript()
	data := []byte(strings.Join(lines, "\n") + "\n")
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			root := t.TempDir()
			fake := &fakeIssueCounter{}
			tl, logs, stop, done := runTailer(t, root, WithInternalIssueCounter(fake))
			writeChunks(t, transcriptPath(root), data, rand.New(rand.NewPCG(seed, seed)))
			// The agent has exited: drain.
			stop()
			<-done
			if got := logs.eventTypes(t); !reflect.DeepEqual(got, want) {
				t.Fatalf("events = %v, want %v", got, want)
			}
			s := tl.Summary()
			if s.Lines != int64(len(lines)) || s.Malformed != 0 || s.ToolUses != 2 || s.InternalIssues != 1 || s.Turns != 3 || s.Bytes != int64(len(data)) {
				t.Fatalf("summary = %+v", s)
			}
			if len(fake.calls) != 1 || !reflect.DeepEqual(fake.calls[0], []string{"workspace_broken", "error"}) {
				t.Fatalf("internal issue counter calls = %v", fake.calls)
			}
		})
	}
}

func TestFileLateCreation(t *testing.T) {
	root := t.TempDir()
	tl, logs, stop, done := runTailer(t, root)
	defer func() { stop(); <-done }()
	// Several polls find nothing, not even the projects directory.
	testutil.WaitFor(t, "polls before the file exists", func() bool { return time.Since(tl.Heartbeat()) < time.Millisecond })
	time.Sleep(20 * time.Millisecond)
	if n := len(logs.records(t, "")); n != 0 {
		t.Fatalf("logs before the file exists: %s", logs.text())
	}
	path := transcriptPath(root)
	writeChunks(t, path, []byte(assistantLine("m", textBlock("late"))+"\n"), rand.New(rand.NewPCG(1, 1)))
	testutil.WaitFor(t, "the late line", func() bool { return len(logs.eventTypes(t)) == 1 })
	if found := logs.records(t, "transcript found"); len(found) != 1 || found[0]["path"] != path {
		t.Fatalf("transcript found lines = %v", found)
	}
}

func TestFilePartialLineWaitsForNewline(t *testing.T) {
	root := t.TempDir()
	path := transcriptPath(root)
	line := assistantLine("m", textBlock("two halves"))
	writeChunks(t, path, []byte(line[:len(line)/2]), rand.New(rand.NewPCG(2, 2)))
	tl, logs, stop, done := runTailer(t, root)
	testutil.WaitFor(t, "the first half read", func() bool { return tl.Summary().Bytes == int64(len(line)/2) })
	if n := len(logs.eventTypes(t)); n != 0 {
		t.Fatalf("acted on an unfinished line: %s", logs.text())
	}
	writeChunks(t, path, []byte(line[len(line)/2:]+"\n"+line[:10]), rand.New(rand.NewPCG(3, 3)))
	testutil.WaitFor(t, "the completed line", func() bool { return len(logs.eventTypes(t)) == 1 })
	stop()
	<-done
	if warn := logs.records(t, "transcript ends with an unterminated line; left unprocessed"); len(warn) != 1 || warn[0]["bytes"] != float64(10) {
		t.Fatalf("drain warnings = %v", warn)
	}
	if got := logs.eventTypes(t); !reflect.DeepEqual(got, []string{"text"}) {
		t.Fatalf("events = %v", got)
	}
}

func TestFileHugeLine(t *testing.T) {
	const size = 16 << 20
	huge := toolResultLine("toolu_huge", strings.Repeat("z", size), false)
	after := assistantLine("m", textBlock("after the huge line"))
	cases := []struct {
		name      string
		maxLine   int64
		truncated bool
	}{
		{"above the limit: counted from its head", DefaultMaxLineBytes, true},
		{"below a raised limit: decoded in full", 4 * size, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tl, logs, stop, done := runTailer(t, root, WithMaxLineBytes(tc.maxLine))
			writeChunks(t, transcriptPath(root), []byte(huge+"\n"+after+"\n"), rand.New(rand.NewPCG(4, 4)))
			testutil.WaitFor(t, "both lines", func() bool { return len(logs.eventTypes(t)) == 2 })
			stop()
			<-done
			recs := logs.records(t, "agent_stream")
			if recs[0]["type"] != "tool_result" || recs[0]["tool_use_id"] != "toolu_huge" || recs[1]["type"] != "text" {
				t.Fatalf("events = %v", recs)
			}
			if _, truncated := recs[0]["truncated"]; truncated != tc.truncated {
				t.Fatalf("truncated = %v, want %v: %v", truncated, tc.truncated, recs[0])
			}
			if s := tl.Summary(); s.Lines != 2 || s.Malformed != 0 {
				t.Fatalf("summary = %+v", s)
			}
		})
	}
}

func TestFileTruncation(t *testing.T) {
	root := t.TempDir()
	path := transcriptPath(root)
	first := []string{assistantLine("m1", textBlock("one")), assistantLine("m1", textBlock("two")), assistantLine("m1", textBlock("three"))}
	writeChunks(t, path, []byte(strings.Join(first, "\n")+"\n"), rand.New(rand.NewPCG(5, 5)))
	_, logs, stop, done := runTailer(t, root)
	defer func() { stop(); <-done }()
	testutil.WaitFor(t, "the first lines", func() bool { return len(logs.eventTypes(t)) == 3 })
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the shrink noticed", func() bool { return len(logs.records(t, "transcript shrank; reading from the start")) == 1 })
	writeChunks(t, path, []byte(assistantLine("m2", toolUseBlock("toolu_t", "Read", `{}`))+"\n"), rand.New(rand.NewPCG(6, 6)))
	testutil.WaitFor(t, "the line written after truncation", func() bool { return len(logs.eventTypes(t)) == 4 })
	if got := logs.eventTypes(t); got[3] != "tool_use" {
		t.Fatalf("events = %v", got)
	}
}

func TestFileReplaced(t *testing.T) {
	root := t.TempDir()
	path := transcriptPath(root)
	writeChunks(t, path, []byte(assistantLine("m1", textBlock("old file line, long enough to be past the new file's end"))+"\n"), rand.New(rand.NewPCG(7, 7)))
	_, logs, stop, done := runTailer(t, root)
	defer func() { stop(); <-done }()
	testutil.WaitFor(t, "the old file", func() bool { return len(logs.eventTypes(t)) == 1 })
	tmp := path + ".tmp"
	writeChunks(t, tmp, []byte(assistantLine("m2", textBlock("new"))+"\n"), rand.New(rand.NewPCG(8, 8)))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the new file", func() bool { return len(logs.eventTypes(t)) == 2 })
}

func TestFileSubagents(t *testing.T) {
	root := t.TempDir()
	main := transcriptPath(root)
	sub := filepath.Join(filepath.Dir(main), testSession, "subagents", "agent-a1b2c3.jsonl")
	_, logs, stop, done := runTailer(t, root)
	writeChunks(t, main, []byte(assistantLine("m", toolUseBlock("toolu_task", "Task", `{"prompt":"explore"}`))+"\n"), rand.New(rand.NewPCG(9, 9)))
	sideLine := strings.Replace(assistantLine("ms", toolUseBlock("toolu_side", internalIssueToolName, `{"category":"auth"}`)),
		`"isSidechain":false`, `"isSidechain":true,"agentId":"a1b2c3"`, 1)
	writeChunks(t, sub, []byte(sideLine+"\n"), rand.New(rand.NewPCG(10, 10)))
	stop()
	<-done
	recs := logs.records(t, "agent_stream")
	if len(recs) != 2 || recs[1]["source"] != "subagent" || recs[1]["agent_id"] != "a1b2c3" || recs[1]["tool"] != internalIssueToolName {
		t.Fatalf("events = %v", recs)
	}
	if n := len(logs.records(t, "internal issue reported")); n != 1 {
		t.Fatalf("internal issue from the subagent file logged %d times", n)
	}
}

func TestFileRemovedWhileWritten(t *testing.T) {
	root := t.TempDir()
	path := transcriptPath(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_, logs, stop, done := runTailer(t, root)
	defer func() { stop(); <-done }()
	if _, err := f.WriteString(assistantLine("m", textBlock("before")) + "\n"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the first line", func() bool { return len(logs.eventTypes(t)) == 1 })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(assistantLine("m", textBlock("after removal")) + "\n"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the line written after removal", func() bool { return len(logs.eventTypes(t)) == 2 })
}
