package transcript

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// maxFuzzInput keeps each fuzz execution in the millisecond range.
const maxFuzzInput = 16 << 10

func fuzzSeeds(f *testing.F) {
	lines, _ := sampleTranscript()
	for _, l := range lines {
		f.Add([]byte(l))
	}
	f.Add([]byte(lines[1] + lines[2]))
	f.Add([]byte(lines[2][:40] + lines[3]))
	f.Add([]byte("\x00\x00" + lines[1] + "\x00"))
	f.Add([]byte(`{"type":"assistant","message":{"content":"x"}}`))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_use","name":"mcp__tatara__report_internal_issue","input":"bad"}]}}`))
	f.Add([]byte(`{"a":{"a":{"a":{"a":{"a":{"a":`))
	f.Add([]byte(`{"}{"{"}{"`))
}

// FuzzProcessLine: no input panics, every event carries a label from the closed set, and the
// summary agrees with the log.
func FuzzProcessLine(f *testing.F) {
	fuzzSeeds(f)
	allowed := map[string]bool{labelOther: true, labelMalformed: true}
	for _, l := range blockLabels {
		allowed[l] = true
	}
	for _, l := range recordLabels {
		allowed[l] = true
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(line) > maxFuzzInput {
			t.Skip("long lines are covered by the file tests; here they only slow the search")
		}
		for _, headOnly := range []bool{false, true} {
			fake := &fakeIssueCounter{}
			tl, logs := newTestTailer(WithInternalIssueCounter(fake))
			if headOnly {
				tl.processLine(source{kind: "main"}, line[:len(line)/2], int64(len(line))+1)
			} else {
				tl.processLine(source{kind: "main"}, line, int64(len(line)))
			}
			types := logs.eventTypes(t)
			for _, typ := range types {
				if !allowed[typ] {
					t.Fatalf("event type %q is outside the label set", typ)
				}
			}
			s := tl.Summary()
			if s.Lines != 1 || s.Events != int64(len(types)) || s.InternalIssues != int64(len(fake.calls)) {
				t.Fatalf("summary %+v disagrees with %d events and %d issue counts", s, len(types), len(fake.calls))
			}
			for _, c := range fake.calls {
				if !issueCategories[c[0]] || !issueSeverities[c[1]] {
					t.Fatalf("internal issue labels %v outside the enums", c)
				}
			}
		}
	})
}

// FuzzChunking: writing a file in arbitrary pieces, polled between pieces, yields exactly the
// events of reading it whole.
func FuzzChunking(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("long inputs are covered by the file tests; here they only slow the search")
		}
		whole := readAll(t, data, 0)
		for seed := range uint64(3) {
			if got := readAll(t, data, seed+1); !reflect.DeepEqual(got, whole) {
				t.Fatalf("chunked read (seed %d) = %v, whole read = %v", seed+1, got, whole)
			}
		}
	})
}

// readAll writes data to a transcript (in random pieces unless seed is 0), polling after each,
// then drains, and returns the event types seen and the summary.
func readAll(t *testing.T, data []byte, seed uint64) []any {
	root := fuzzRoot(t)
	path := transcriptPath(root)
	// Create truncates: one file per process is rewritten, because creating and deleting a
	// directory per execution makes the file system, not the code, the bottleneck.
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	tl, logs := newTestTailerAt(root)
	rng := rand.New(rand.NewPCG(seed, seed))
	for rest := data; len(rest) > 0; {
		n := len(rest)
		if seed != 0 {
			n = min(n, 1+rng.IntN(max(64, len(data)/32)))
		}
		if _, err := file.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
		tl.pollOnce()
	}
	tl.Drain()
	s := tl.Summary()
	return []any{logs.eventTypes(t), s.Lines, s.Events, s.Malformed, s.ToolUses, s.InternalIssues}
}

var (
	fuzzRootOnce sync.Once
	fuzzRootDir  string
	fuzzRootErr  error
)

// fuzzRoot is one transcript root per test process, removed when the process's tests end.
func fuzzRoot(t *testing.T) string {
	fuzzRootOnce.Do(func() {
		fuzzRootDir, fuzzRootErr = os.MkdirTemp("", "transcript-fuzz")
		if fuzzRootErr == nil {
			fuzzRootErr = os.MkdirAll(filepath.Dir(transcriptPath(fuzzRootDir)), 0o755)
		}
	})
	if fuzzRootErr != nil {
		t.Fatal(fuzzRootErr)
	}
	return fuzzRootDir
}

func newTestTailerAt(root string) (*Tailer, *logCapture) {
	c := &logCapture{}
	return New(root, testSession, WithLogger(c.logger())), c
}
