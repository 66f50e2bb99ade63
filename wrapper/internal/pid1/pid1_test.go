//go:build linux

package pid1

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests change this test process: it becomes a subreaper and runs the process reaper, and
// every child it starts goes through Reaper.Start, as in the wrapper.

func TestSetNotDumpable(t *testing.T) {
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	if d, err := Dumpable(); err != nil || !d {
		t.Fatalf("a test process starts dumpable: got %v, %v", d, err)
	}
	if err := SetNotDumpable(); err != nil {
		t.Fatal(err)
	}
	if d, err := Dumpable(); err != nil || d {
		t.Fatalf("PR_GET_DUMPABLE after SetNotDumpable = %v, %v; want false", d, err)
	}
}

func TestSetChildSubreaper(t *testing.T) {
	if err := SetChildSubreaper(); err != nil {
		t.Fatal(err)
	}
	if sr, err := IsChildSubreaper(); err != nil || !sr {
		t.Fatalf("PR_GET_CHILD_SUBREAPER after SetChildSubreaper = %v, %v; want true", sr, err)
	}
}

// TestReaper: orphans of a child are adopted and reaped, none is left a zombie, and the child's
// own status reaches its waiter however its exit interleaves with theirs.
func TestReaper(t *testing.T) {
	if err := SetChildSubreaper(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		script string
		exited bool
		code   int
		signal unix.Signal
	}{
		{"exit code with orphans still running", "for i in $(seq 25); do ( sleep 0.3 & ); done; exit 7", true, 7, 0},
		{"exit code as orphans exit", "for i in $(seq 25); do ( sleep 0.2 & ); done; sleep 0.2; exit 3", true, 3, 0},
		{"immediate exit", "exit 5", true, 5, 0},
		{"killed by a signal", "kill -KILL $$", false, 0, unix.SIGKILL},
	}
	r := ProcessReaper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := r.Orphans()
			exit, err := r.Start(exec.Command("/bin/bash", "-c", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			var ws unix.WaitStatus
			select {
			case ws = <-exit:
			case <-time.After(30 * time.Second):
				t.Fatal("the child's status never arrived")
			}
			if ws.Exited() != tc.exited || (tc.exited && ws.ExitStatus() != tc.code) || (!tc.exited && ws.Signal() != tc.signal) {
				t.Fatalf("wait status %#x: exited %v code %d signal %v; want exited %v code %d signal %v",
					uint32(ws), ws.Exited(), ws.ExitStatus(), ws.Signal(), tc.exited, tc.code, tc.signal)
			}
			if !strings.Contains(tc.script, "seq 25") {
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for r.Orphans()-before < 25 || len(zombieChildren(t)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d orphans reaped, want 25; zombie children: %v", r.Orphans()-before, zombieChildren(t))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestReaperShortChildren: children that exit at once, many started back to back, each deliver
// their own status (the reaper cannot take one for an orphan before it is registered).
func TestReaperShortChildren(t *testing.T) {
	r := ProcessReaper()
	for i := range 40 {
		exit, err := r.Start(exec.Command("/bin/bash", "-c", "exit "+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ws := <-exit:
			if !ws.Exited() || ws.ExitStatus() != i {
				t.Fatalf("child %d: wait status %#x, want exit %d", i, uint32(ws), i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("child %d: status never arrived", i)
		}
	}
}

// TestReaperStartFailure: a command that cannot start leaves nothing registered and no error
// in the reaper.
func TestReaperStartFailure(t *testing.T) {
	_, err := ProcessReaper().Start(exec.Command(filepath.Join(t.TempDir(), "missing")))
	if err == nil {
		t.Fatal("starting a missing command succeeded")
	}
}

// zombieChildren lists this process's children in state Z.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var zombies []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[0] == "Z" && fields[1] == self {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			zombies = append(zombies, pid)
		}
	}
	return zombies
}
