package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the program under test: with asPause set it runs main, so the tests
// start a real process without building one.
const asPause = "PAUSE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPause) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func pauseCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asPause+"=1")
	return cmd
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"-v", "--version"} {
		out, err := pauseCommand(arg).Output()
		if err != nil {
			t.Fatalf("pause %s: %v", arg, err)
		}
		if got := strings.TrimSpace(string(out)); got != "pause "+version {
			t.Errorf("pause %s printed %q, want %q", arg, got, "pause "+version)
		}
	}
}

// TestStopExitsZero: SIGTERM and SIGINT end a sandbox normally (exit 0), as upstream pause does. The
// signal is sent once pause says it catches them, never at a moment that usually comes after (the
// Go runtime catches every signal from its start, so /proc's SigCgt cannot tell).
func TestStopExitsZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := pauseCommand()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if want := "pause " + version + " ready\n"; err != nil || line != want {
				t.Fatalf("pause's first line: %q (%v), want %q", line, err, want)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("pause after %s: %v, want exit code 0", sig, err)
			}
		})
	}
}

// TestReapCollectsExitedChildren: an exited child is a zombie until reaped; reap leaves none.
func TestReapCollectsExitedChildren(t *testing.T) {
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	waitFor(t, "the child to exit", func() bool { return procState(pid) == "Z" })
	reap()
	if state := procState(pid); state != "" {
		t.Fatalf("child %d is in state %q after reap, want it gone", pid, state)
	}
	if _, err := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); !errors.Is(err, syscall.ECHILD) {
		t.Errorf("wait4 on the reaped child: %v, want ECHILD", err)
	}
}

// procState is the state letter of /proc/<pid>/stat ("" once the process is gone).
func procState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name in parentheses may hold spaces: the state follows its closing one.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	if fields := strings.Fields(string(rest)); len(fields) > 0 {
		return fields[0]
	}
	return ""
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
