package transcript

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// dedupeKeyCases are the transcript keys the tailer remembers, each with a line builder that
// puts key (plain ASCII, no escaping needed) in that place and a unique small uuid elsewhere, so
// only the key under test varies.
var dedupeKeyCases = []struct {
	name string
	line func(i int, key string) string
}{
	{"line uuid", func(_ int, key string) string {
		return `{"type":"system","subtype":"s","uuid":"` + key + `"}`
	}},
	{"tool_use id", func(i int, key string) string {
		return `{"type":"assistant","uuid":"u-` + strconv.Itoa(i) + `","message":{"id":"m","content":[{"type":"tool_use","id":"` +
			key + `","name":"Bash","input":{}}]}}`
	}},
	{"assistant message id", func(i int, key string) string {
		return `{"type":"assistant","uuid":"u-` + strconv.Itoa(i) + `","message":{"id":"` + key +
			`","content":[{"type":"text","text":"x"}],"usage":{"output_tokens":1}}}`
	}},
}

// uniqueKey returns key number i, size bytes long (ASCII).
func uniqueKey(i, size int) string {
	id := fmt.Sprintf("k%015d", i)
	if size <= len(id) {
		return id
	}
	return strings.Repeat("x", size-len(id)) + id
}

// retainedHeap returns how much the live heap grew (after GC) while a tailer was fed n lines
// with keys of keySize bytes, the tailer still alive.
func retainedHeap(n, keySize int, line func(int, string) string) uint64 {
	var before, after runtime.MemStats
	// Two collections: sync.Pool contents survive the first in the victim cache.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	tl := New("/nonexistent", testSession) // discard logger: only the tailer's own state is kept
	for i := range n {
		l := line(i, uniqueKey(i, keySize))
		tl.processLine(source{kind: "main"}, []byte(l), int64(len(l)))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tl)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// TestDedupeMemoryIsBoundedByKeyCount: the tailer remembers every line uuid, tool_use id and
// assistant message id it saw; all are the agent's to choose, so a key of 1 MiB must cost what a
// key of 20 bytes costs. Measured as a ratio of retained heap against the same number of lines
// with small keys, in this process.
func TestDedupeMemoryIsBoundedByKeyCount(t *testing.T) {
	const (
		hugeKey  = 1 << 20
		maxRatio = 3.0
	)
	lines := 32
	if raceEnabled {
		lines = 8 // still 8 MiB kept if keys were kept whole
	}
	for _, tc := range dedupeKeyCases {
		t.Run(tc.name, func(t *testing.T) {
			retainedHeap(lines, 0, tc.line) // warm-up: one-time caches (encoding/json's) are not the tailer's
			small := retainedHeap(lines, 0, tc.line)
			huge := retainedHeap(lines, hugeKey, tc.line)
			// The baseline is a few KiB; floored at 16 KiB per line, so allocator noise (7 KiB
			// over 8 lines was seen under -race) cannot fail the ratio, while keys kept whole
			// give 64 (1 MiB / 16 KiB) and a 64 KiB prefix kept per key still fails it.
			base := max(small, uint64(lines*16<<10))
			ratio := float64(huge) / float64(base)
			t.Logf("%d lines: retained heap %d B with small keys, %d B with 1 MiB keys: ratio %.2f to the floored baseline %d B (limit %.1f)",
				lines, small, huge, ratio, base, maxRatio)
			if ratio > maxRatio {
				t.Fatalf("1 MiB keys retained %.1f MiB, %.0fx the heap of small keys: keys are kept whole",
					float64(huge)/(1<<20), ratio)
			}
		})
	}
}

// TestBoundedMap: at most max keys, the oldest forgotten first, an update keeps a key's place.
func TestBoundedMap(t *testing.T) {
	cases := []struct {
		name   string
		max    int
		puts   []string
		remain []string // remembered afterwards, in no particular order
		gone   []string
	}{
		{"under the bound", 3, []string{"a", "b"}, []string{"a", "b"}, nil},
		{"at the bound", 3, []string{"a", "b", "c"}, []string{"a", "b", "c"}, nil},
		{"the oldest goes first", 3, []string{"a", "b", "c", "d", "e"}, []string{"c", "d", "e"}, []string{"a", "b"}},
		{"an update does not move a key", 3, []string{"a", "b", "a", "c", "d"}, []string{"b", "c", "d"}, []string{"a"}},
		{"around the ring twice", 2, []string{"a", "b", "c", "d", "e", "f", "g"}, []string{"f", "g"}, []string{"a", "c", "e"}},
		{"bound of one", 1, []string{"a", "b"}, []string{"b"}, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newBoundedMap[int](tc.max)
			for i, k := range tc.puts {
				m.put(hashKey(k), i)
				if m.len() > tc.max || len(m.ring) > tc.max {
					t.Fatalf("after %q: %d keys, ring %d, bound %d", k, m.len(), len(m.ring), tc.max)
				}
			}
			for _, k := range tc.remain {
				if _, ok := m.get(hashKey(k)); !ok {
					t.Errorf("%q forgotten, want remembered", k)
				}
			}
			for _, k := range tc.gone {
				if _, ok := m.get(hashKey(k)); ok {
					t.Errorf("%q remembered, want forgotten", k)
				}
			}
			if m.len() != len(tc.remain) {
				t.Errorf("%d keys, want %d", m.len(), len(tc.remain))
			}
		})
	}
}

// TestDedupeEvictionKeepsRecentKeys runs the tailer with a small bound: repeats of the most
// recent lines and tool_use ids are still skipped after many evictions, only keys older than the
// bound are counted again, and token totals keep a forgotten message's usage.
func TestDedupeEvictionKeepsRecentKeys(t *testing.T) {
	const bound = 8
	tl, logs := newTestTailer(WithMaxDedupeKeys(bound))
	var lines []string
	for i := range 5 * bound {
		lines = append(lines, assistantLine(fmt.Sprintf("msg_%d", i), toolUseBlock(fmt.Sprintf("toolu_%d", i), "Bash", `{}`)))
	}
	feed(tl, lines...)
	s := tl.Summary()
	if s.ToolUses != 5*bound || s.Turns != 5*bound || s.OutputTokens != 5*5*bound {
		t.Fatalf("after %d unique lines: summary %+v", 5*bound, s)
	}
	// The last bound lines again (a resume): every one is a duplicate.
	feed(tl, lines[len(lines)-bound:]...)
	if got := tl.Summary(); got.ToolUses != s.ToolUses || got.Events != s.Events || got.Turns != s.Turns || got.OutputTokens != s.OutputTokens {
		t.Fatalf("repeating the %d most recent lines changed the summary:\n%+v\n%+v", bound, s, got)
	}
	// A new line reusing a recent tool_use id and message id: the line counts, the tool_use and
	// the turn do not.
	feed(tl, assistantLine(fmt.Sprintf("msg_%d", 5*bound-1), toolUseBlock(fmt.Sprintf("toolu_%d", 5*bound-1), "Bash", `{}`)))
	if got := tl.Summary(); got.ToolUses != s.ToolUses || got.Turns != s.Turns || got.OutputTokens != s.OutputTokens {
		t.Fatalf("a recent tool_use id and message id were counted again: %+v", got)
	}
	// The first line is older than the bound: it is counted again, as documented.
	feed(tl, lines[0])
	if got := tl.Summary(); got.ToolUses != s.ToolUses+1 || got.Turns != s.Turns+1 {
		t.Fatalf("a line older than the bound: summary %+v, want one more tool use and turn than %+v", got, s)
	}
	if n := tl.seenUUID.m.len(); n != bound {
		t.Fatalf("%d line uuids remembered, want the bound %d", n, bound)
	}
	if n := strings.Count(logs.text(), `"msg":"duplicate transcript line skipped"`); n != bound {
		t.Fatalf("%d duplicate lines logged, want %d", n, bound)
	}
}

// TestDedupeDefaultBound: the production bound holds, and is the documented constant.
func TestDedupeDefaultBound(t *testing.T) {
	tl, _ := newTestTailer()
	for i := range MaxDedupeKeys + 10 {
		tl.seenUUID.firstTime(uniqueKey(i, 0))
	}
	if n := tl.seenUUID.m.len(); n != MaxDedupeKeys {
		t.Fatalf("%d keys remembered, want MaxDedupeKeys (%d)", n, MaxDedupeKeys)
	}
	if tl.seenUUID.firstTime(uniqueKey(MaxDedupeKeys+9, 0)) || !tl.seenUUID.firstTime(uniqueKey(0, 0)) {
		t.Fatal("the newest key must be remembered and the oldest forgotten")
	}
}

// BenchmarkDedupeHeap reports the heap a tailer retains for lines whose uuids are 1 MiB each,
// against the same number of lines with 16-byte uuids, and the heap of a tailer whose three dedupe
// tables are full (MaxDedupeKeys keys each).
func BenchmarkDedupeHeap(b *testing.B) {
	const lines = 100
	line := dedupeKeyCases[0].line
	var small, huge, full uint64
	retainedHeap(lines, 0, line) // warm-up, as in TestDedupeMemoryIsBoundedByKeyCount
	for b.Loop() {
		small = retainedHeap(lines, 0, line)
		huge = retainedHeap(lines, 1<<20, line)
		full = fullTablesHeap()
	}
	b.ReportMetric(float64(small)/1024, "small_keys_KiB")
	b.ReportMetric(float64(huge)/1024, "1MiB_keys_KiB")
	b.ReportMetric(float64(huge)/float64(max(small, 1)), "ratio")
	b.ReportMetric(float64(full)/(1<<20), "full_tables_MiB")
}

// fullTablesHeap returns the live heap of a tailer whose three dedupe tables are full.
func fullTablesHeap() uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	tl := New("/nonexistent", testSession)
	for i := range MaxDedupeKeys {
		k := uniqueKey(i, 0)
		tl.seenUUID.firstTime(k)
		tl.seenTool.firstTime(k)
		tl.messageUsage(k, &usage{OutputTokens: 1})
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tl)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}
