package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

// fatalRecorder is a testing.TB whose Fatal records the message and returns, so a test can look
// at the failure BuildBinary reports.
type fatalRecorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatal(args ...any) { f.record(fmt.Sprint(args...)) }

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.record(fmt.Sprintf(format, args...)) }

func (f *fatalRecorder) record(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, msg)
}

func (f *fatalRecorder) messages() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs...)
}

func TestSyncBuffer(t *testing.T) {
	tests := []struct {
		name             string
		writers, lines   int
		readWhileWriting bool
	}{
		{name: "zero value, nothing written"},
		{name: "one writer", writers: 1, lines: 100},
		{name: "many writers", writers: 8, lines: 200},
		{name: "many writers, read while writing", writers: 8, lines: 200, readWhileWriting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf SyncBuffer
			stop := make(chan struct{})
			var readers sync.WaitGroup
			if tt.readWhileWriting {
				readers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							_ = buf.String()
						}
					}
				})
			}
			var writers sync.WaitGroup
			for w := range tt.writers {
				writers.Go(func() {
					for i := range tt.lines {
						line := fmt.Sprintf("writer %d line %d\n", w, i)
						if n, err := buf.Write([]byte(line)); n != len(line) || err != nil {
							t.Errorf("Write(%q) = %d, %v; want %d, nil", line, n, err, len(line))
						}
					}
				})
			}
			writers.Wait()
			close(stop)
			readers.Wait()

			got := buf.String()
			if tt.writers == 0 {
				if got != "" {
					t.Fatalf("String() = %q, want empty", got)
				}
				return
			}
			// Every line intact, each writer's lines in its order.
			next := make([]int, tt.writers)
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			for _, l := range lines {
				var w, i int
				if _, err := fmt.Sscanf(l, "writer %d line %d", &w, &i); err != nil || w < 0 || w >= tt.writers {
					t.Fatalf("torn line %q", l)
				}
				if i != next[w] {
					t.Fatalf("writer %d: line %d after line %d", w, i, next[w]-1)
				}
				next[w]++
			}
			if len(lines) != tt.writers*tt.lines {
				t.Errorf("%d lines, want %d", len(lines), tt.writers*tt.lines)
			}
		})
	}
}

func TestBuildBinary(t *testing.T) {
	tests := []struct {
		name, moduleDir, pkg string
		wantName             string
		wantErr              []string // substrings of the failure; nil: the build succeeds
	}{
		{name: "relative package", moduleDir: ".", pkg: "./testdata/hello", wantName: "hello"},
		{name: "import path", moduleDir: ".", pkg: "tatara.dev/testkit/testutil/testdata/hello", wantName: "hello"},
		{name: "package directory itself", moduleDir: "testdata/hello", pkg: ".", wantName: "hello"},
		{name: "does not compile", moduleDir: ".", pkg: "./testdata/broken",
			wantErr: []string{"failed to build ./testdata/broken in " + mustAbs(t, "."), "go build -trimpath -o", "exit status 1", `cannot use "not an int"`}},
		{name: "no such package", moduleDir: ".", pkg: "./testdata/missing",
			wantErr: []string{"failed to build ./testdata/missing", "testdata/missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &fatalRecorder{TB: t}
			bin := BuildBinary(rec, tt.moduleDir, tt.pkg)
			if tt.wantErr != nil {
				msgs := rec.messages()
				if bin != "" || len(msgs) != 1 {
					t.Fatalf("BuildBinary = %q with failures %q, want \"\" and one failure", bin, msgs)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(msgs[0], want) {
						t.Errorf("failure lacks %q:\n%s", want, msgs[0])
					}
				}
				// The failed build is not retried: the next test gets the same message.
				if again := BuildBinary(rec, tt.moduleDir, tt.pkg); again != "" || len(rec.messages()) != 2 || rec.messages()[1] != msgs[0] {
					t.Errorf("second BuildBinary = %q with failures %q, want the same failure again", again, rec.messages())
				}
				return
			}
			if msgs := rec.messages(); len(msgs) != 0 {
				t.Fatalf("BuildBinary failed: %q", msgs)
			}
			if filepath.Base(bin) != tt.wantName {
				t.Errorf("binary %s, want it named %s", bin, tt.wantName)
			}
			out, err := exec.Command(bin, "a", "b").Output()
			if err != nil || string(out) != "hello 2\n" {
				t.Errorf("%s a b = %q, %v; want \"hello 2\\n\"", bin, out, err)
			}
			info, err := exec.Command("go", "version", "-m", bin).Output()
			if err != nil || !strings.Contains(string(info), "CGO_ENABLED=0") {
				t.Errorf("go version -m %s = %v, want CGO_ENABLED=0:\n%s", bin, err, info)
			}
			// Built once: the same file, not rebuilt.
			before, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			if again := BuildBinary(t, tt.moduleDir, tt.pkg); again != bin {
				t.Errorf("second BuildBinary = %s, want %s", again, bin)
			}
			if after, err := os.Stat(bin); err != nil || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("%s rebuilt: %v", bin, err)
			}
		})
	}
}

func mustAbs(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// Tests running in parallel share one build.
func TestBuildBinaryConcurrentCallersShareOneBuild(t *testing.T) {
	const callers = 4
	paths := make([]string, callers)
	recs := make([]*fatalRecorder, callers)
	var wg sync.WaitGroup
	for i := range callers {
		recs[i] = &fatalRecorder{TB: t}
		wg.Go(func() { paths[i] = BuildBinary(recs[i], "testdata", "./hello") })
	}
	wg.Wait()
	for i := range callers {
		if msgs := recs[i].messages(); len(msgs) != 0 || paths[i] == "" || paths[i] != paths[0] {
			t.Errorf("caller %d: %q, failures %q; want %q", i, paths[i], msgs, paths[0])
		}
	}
}

func TestRemoveBinaries(t *testing.T) {
	bin := BuildBinary(t, ".", "./testdata/hello")
	RemoveBinaries()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("%s after RemoveBinaries: %v, want it gone", bin, err)
	}
	rebuilt := BuildBinary(t, ".", "./testdata/hello")
	if _, err := os.Stat(rebuilt); err != nil {
		t.Fatalf("BuildBinary after RemoveBinaries: %v", err)
	}
	if filepath.Dir(filepath.Dir(rebuilt)) == filepath.Dir(filepath.Dir(bin)) {
		t.Errorf("rebuilt %s in the removed directory of %s", rebuilt, bin)
	}
}

func TestWorkspaceDir(t *testing.T) {
	dir := WorkspaceDir(t)
	for _, f := range []string{"go.work", "cli/go.mod", "testkit/testutil/testutil.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("WorkspaceDir = %s, lacks %s: %v", dir, f, err)
		}
	}
	if again := WorkspaceDir(t); again != dir {
		t.Errorf("second WorkspaceDir = %s, want %s", again, dir)
	}
}

func TestCheckBuildInfo(t *testing.T) {
	good := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_build_info", Help: "h"}, BuildInfoLabels)
	good.MustRegister(g)
	g.WithLabelValues("go1", "abc", "1.0").Set(1)
	CheckBuildInfo(t, good, "x_build_info")

	bad := prometheus.NewRegistry()
	b := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_build_info", Help: "h"}, []string{"version"})
	bad.MustRegister(b)
	b.WithLabelValues("1.0").Set(1)
	r := &failRecorder{TB: t}
	CheckBuildInfo(r, bad, "x_build_info")
	if !r.failed {
		t.Error("a build_info without revision and goversion passed")
	}
}

// failRecorder records a failure instead of failing the test.
type failRecorder struct {
	testing.TB
	failed bool
}

func (f *failRecorder) Helper()               {}
func (f *failRecorder) Errorf(string, ...any) { f.failed = true }

func TestCheckHistogramBuckets(t *testing.T) {
	good := []string{`m_bucket{a="x",le="0.5"} 0`, `m_bucket{a="x",le="1"} 1`, `m_bucket{a="x",le="+Inf"} 1`}
	CheckHistogramBuckets(t, good, "m", `a="x"`, []float64{0.5, 1}, 1)
	for name, lines := range map[string][]string{
		"wrong le":    {`m_bucket{a="x",le="0.25"} 0`, `m_bucket{a="x",le="1"} 1`, `m_bucket{a="x",le="+Inf"} 1`},
		"wrong count": {`m_bucket{a="x",le="0.5"} 0`, `m_bucket{a="x",le="1"} 1`, `m_bucket{a="x",le="+Inf"} 2`},
	} {
		r := &failRecorder{TB: t}
		CheckHistogramBuckets(r, lines, "m", `a="x"`, []float64{0.5, 1}, 1)
		if !r.failed {
			t.Errorf("%s: passed", name)
		}
	}
}
