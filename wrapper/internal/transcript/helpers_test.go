package transcript

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/testkit/testutil"
)

const testSession = "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f"

// logCapture collects JSON log lines.
type logCapture struct{ testutil.SyncBuffer }

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func (c *logCapture) text() string { return c.String() }

// records returns the log lines whose msg is msg ("" for all).
func (c *logCapture) records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(c.text()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %q", err, l)
		}
		if msg == "" || m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// eventTypes returns the type of every agent_stream line, in order.
func (c *logCapture) eventTypes(t testing.TB) []string {
	var out []string
	for _, r := range c.records(t, "agent_stream") {
		out = append(out, fmt.Sprint(r["type"]))
	}
	return out
}

// fakeIssueCounter records the labels it is asked for and counts on a real counter per pair.
type fakeIssueCounter struct {
	mu     sync.Mutex
	calls  [][]string
	counts map[string]prometheus.Counter
}

func (f *fakeIssueCounter) WithLabelValues(lvs ...string) prometheus.Counter {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]string(nil), lvs...))
	if f.counts == nil {
		f.counts = map[string]prometheus.Counter{}
	}
	k := strings.Join(lvs, "/")
	if _, ok := f.counts[k]; !ok {
		f.counts[k] = prometheus.NewCounter(prometheus.CounterOpts{Name: "fake_total", Help: "fake"})
	}
	return f.counts[k]
}

// Line builders producing the agent CLI's real record shape.

var lineSeq int

func nextUUID() string {
	lineSeq++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", lineSeq)
}

func common(typ, uuid string) string {
	return fmt.Sprintf(`"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/work/repo","sessionId":%q,"version":"2.0.31","gitBranch":"main","type":%q,"uuid":%q,"timestamp":"2026-12-02T15:00:00.000Z"`,
		testSession, typ, uuid)
}

func assistantLine(msgID, block string) string {
	return fmt.Sprintf(`{%s,"requestId":"req_1","message":{"id":%q,"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[%s],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100}}}`,
		common("assistant", nextUUID()), msgID, block)
}

func userPromptLine(text string) string {
	return fmt.Sprintf(`{%s,"message":{"role":"user","content":%s}}`, common("user", nextUUID()), jsonString(text))
}

func toolResultLine(toolUseID, content string, isError bool) string {
	return fmt.Sprintf(`{%s,"message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%s,"is_error":%t}]},"toolUseResult":{"stdout":%s,"stderr":""}}`,
		common("user", nextUUID()), toolUseID, jsonString(content), isError, jsonString(content))
}

func textBlock(text string) string { return `{"type":"text","text":` + jsonString(text) + `}` }

func toolUseBlock(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func newTestTailer(opts ...Option) (*Tailer, *logCapture) {
	c := &logCapture{}
	t := New("/nonexistent", testSession, append([]Option{WithLogger(c.logger())}, opts...)...)
	return t, c
}

func feed(t *Tailer, lines ...string) {
	for _, l := range lines {
		t.processLine(source{kind: "main"}, []byte(l), int64(len(l)))
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fuzzRootDir != "" {
		_ = os.RemoveAll(fuzzRootDir)
	}
	os.Exit(code)
}
