// Package testutil holds the helpers the tests of every module of the workspace share: BuildBinary
// builds a main package of the workspace once per test process, SyncBuffer collects what a process
// or a logger writes while the test reads it, WaitFor polls for a condition, CA issues throwaway
// TLS certificates.
//
// Only tests import this package (_test.go files and test helper packages): it imports testing,
// and no binary of the repository may link it.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is an io.Writer safe for concurrent use: a process's stdout and stderr, or a logger
// on several goroutines, write to it while the test reads String. The zero value is ready to use;
// a SyncBuffer must not be copied after first use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// buildKey names one build: the module directory (absolute) and the package as go build takes it.
type buildKey struct{ dir, pkg string }

// build is the outcome of one build, shared by every test of the process that asks for it.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[buildKey]*build{}
	binDir   string // the process's binaries, created by the first build, removed by RemoveBinaries
)

// BuildBinary builds the main package pkg ("./cmd/x" relative to moduleDir, or an import path)
// with `go build` run in moduleDir, and returns the binary's path. The build runs once per process
// for a given moduleDir and pkg, however many tests ask, in parallel or not; a failed build fails
// every test that asks for it, with the go command's output.
//
// The go command is the one of PATH (go test puts its own GOROOT/bin first), run in moduleDir so
// the workspace's go.work applies; CGO_ENABLED=0 and -trimpath, as in the images, so that a test's
// build and make images share one compile of every dependency. The binary is named after the
// package's last path element ("." names it after moduleDir). The binaries stay until
// RemoveBinaries, which the TestMain of a package using BuildBinary calls after m.Run.
func BuildBinary(t testing.TB, moduleDir, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(moduleDir)
	if err != nil {
		t.Fatalf("failed to resolve the module directory %s: %v", moduleDir, err)
		return ""
	}
	key := buildKey{dir: dir, pkg: pkg}
	buildsMu.Lock()
	b, ok := builds[key]
	if !ok {
		b = &build{}
		builds[key] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(key) })
	if b.err != nil {
		t.Fatal(b.err)
		return ""
	}
	return b.path
}

// RemoveBinaries deletes every binary BuildBinary built in this process and forgets them; a later
// BuildBinary builds again. Call it from TestMain after m.Run.
func RemoveBinaries() {
	buildsMu.Lock()
	defer buildsMu.Unlock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	binDir = ""
	builds = map[buildKey]*build{}
}

// outDir returns a new directory, under the process's binary directory, for one binary.
func outDir() (string, error) {
	buildsMu.Lock()
	defer buildsMu.Unlock()
	if binDir == "" {
		d, err := os.MkdirTemp("", "tatara-test-bin-")
		if err != nil {
			return "", err
		}
		binDir = d
	}
	return os.MkdirTemp(binDir, "")
}

func goBuild(k buildKey) (string, error) {
	out, err := outDir()
	if err != nil {
		return "", fmt.Errorf("failed to build %s in %s: %w", k.pkg, k.dir, err)
	}
	bin := filepath.Join(out, binaryName(k))
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, k.pkg)
	cmd.Dir = k.dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build %s in %s (go build -trimpath -o %s %s): %w\n%s", k.pkg, k.dir, bin, k.pkg, err, output)
	}
	return bin, nil
}

// binaryName is the package's last path element, of the directory for a relative package.
func binaryName(k buildKey) string {
	if k.pkg == "." || strings.HasPrefix(k.pkg, "./") || strings.HasPrefix(k.pkg, "../") || filepath.IsAbs(k.pkg) {
		return filepath.Base(filepath.Join(k.dir, k.pkg))
	}
	return path.Base(k.pkg)
}

var (
	workspaceOnce sync.Once
	workspaceDir  string
	workspaceErr  error
)

// WorkspaceDir returns the directory of the go.work the go command uses here (the repository
// root): the way to reach another module of the workspace.
func WorkspaceDir(t testing.TB) string {
	t.Helper()
	dir, err := FindWorkspaceDir()
	if err != nil {
		t.Fatal(err)
		return ""
	}
	return dir
}

// FindWorkspaceDir is WorkspaceDir for a TestMain, which has no testing.TB to fail.
func FindWorkspaceDir() (string, error) {
	workspaceOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOWORK").Output()
		gowork := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			workspaceErr = fmt.Errorf("failed to find go.work: go env GOWORK: %w", err)
		case gowork == "" || gowork == "off":
			workspaceErr = fmt.Errorf("failed to find go.work: go env GOWORK = %q (run the tests inside the workspace, without GOWORK=off)", gowork)
		default:
			workspaceDir = filepath.Dir(gowork)
		}
	})
	return workspaceDir, workspaceErr
}

// MonitoringCRDsDir is the one folder of the prometheus-operator CRDs (hack/monitoring-crds.sh
// writes them): the e2e monitoring chart's crds/, which helmfile's kind environment installs and
// the charts' tests load into their API server, so both validate against the same schemas.
func MonitoringCRDsDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(WorkspaceDir(t), "e2e", "charts", "monitoring", "crds")
}

// WaitFor polls cond every 5 ms until it holds, failing the test after 20 s with what it waited
// for: tests wait on observable state, never on a fixed sleep.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
