//go:build linux

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The wrapper is the agent container's PID 1: it must reap every orphan, forward termination
// signals to the agent's whole process group and still exit with the agent's own code. These
// tests run the built wrapper against bash scripts as the agent, twice: as a child of the test
// (the wrapper is then a subreaper) and as PID 1 of a new PID namespace, as in a pod.

// orphansScript leaves 25 orphans (their parent subshell exits at once), which record who adopted
// them and exit; it then waits until the wrapper has no child but the agent (a process leaves
// /proc only once reaped) and reports how many are left.
const orphansScript = `#!/bin/bash
out=$PID1_TEST_DIR
echo "$PPID" > "$out/wrapper-pid"
# Each orphan waits until its parent ($2, the subshell) is gone: then it has been adopted.
for i in $(seq 25); do
	( sub=$BASHPID; bash -c 'while read -r _ _ _ ppid _ < /proc/$$/stat; [ "$ppid" = "$2" ]; do sleep 0.01; done; echo "$ppid" >> "$1/adopted"' _ "$out" "$sub" & )
done
# others counts the processes, in any state, whose parent is the wrapper, the agent aside
# (stat fields after comm).
others() {
	local n=0 f s
	for f in /proc/[0-9]*/stat; do
		read -r s < "$f" 2> /dev/null || continue
		[ "${f//[^0-9]/}" = "$$" ] && continue
		set -- ${s##*) }
		[ "$2" = "$PPID" ] && n=$((n + 1))
	done
	echo "$n"
}
for _ in $(seq 100); do
	adopted=$(wc -l < "$out/adopted" 2> /dev/null || echo 0)
	left=$(others)
	[ "$adopted" -ge 25 ] && [ "$left" = 0 ] && break
	sleep 0.2
done
echo "$left" > "$out/left"
exit ${AGENT_EXIT:-0}
`

// burstScript exits with 7 while 25 orphans exit around the same moment: the agent's status
// must reach the wrapper's exit code, not be reaped as one more orphan.
const burstScript = `#!/bin/bash
for i in $(seq 25); do
	( sleep 0.5 & )
done
sleep 0.5
exit 7
`

// termScript starts a grandchild that records SIGTERM in a file; the agent itself waits for it
// on SIGTERM, so only a signal to the whole group ends the run.
const termScript = `#!/bin/bash
out=$PID1_TEST_DIR
echo "$$" > "$out/agent.pid"
bash -c 'trap "echo TERM > \"$1/grandchild\"; exit 0" TERM; echo $$ > "$1/grandchild.pid.tmp"; mv "$1/grandchild.pid.tmp" "$1/grandchild.pid"; while :; do sleep 0.05; done' _ "$out" &
trap 'wait; exit 143' TERM
wait
`

func TestPID1Duties(t *testing.T) {
	cases := []struct {
		name    string
		script  string
		env     []string
		sigterm bool
		code    int
		orphans float64 // at least this many orphans_reaped in the summary
		check   func(t *testing.T, out string, wrapperPID int)
	}{
		{name: "orphans are adopted and reaped", script: orphansScript, env: []string{"AGENT_EXIT=0"}, code: 0, orphans: 25,
			check: func(t *testing.T, out string, wrapperPID int) {
				if got := strings.TrimSpace(readFile(t, filepath.Join(out, "wrapper-pid"))); got != strconv.Itoa(wrapperPID) {
					t.Fatalf("the agent's parent was PID %s, want the wrapper, PID %d", got, wrapperPID)
				}
				adopted := strings.Fields(readFile(t, filepath.Join(out, "adopted")))
				if len(adopted) != 25 {
					t.Fatalf("%d orphans reported, want 25", len(adopted))
				}
				for _, ppid := range adopted {
					if ppid != strconv.Itoa(wrapperPID) {
						t.Fatalf("an orphan was adopted by %s, not by the wrapper (%d): adopted by %v", ppid, wrapperPID, adopted)
					}
				}
				if n := strings.TrimSpace(readFile(t, filepath.Join(out, "left"))); n != "0" {
					t.Fatalf("%s orphans left unreaped as children of the wrapper", n)
				}
			}},
		{name: "the agent's exit code survives orphans exiting with it", script: burstScript, code: 7},
		{name: "SIGTERM reaches the agent's process group", script: termScript, sigterm: true, code: 143,
			check: func(t *testing.T, out string, _ int) {
				if got := strings.TrimSpace(readFile(t, filepath.Join(out, "grandchild"))); got != "TERM" {
					t.Fatalf("grandchild recorded %q, want TERM", got)
				}
			}},
	}
	for _, mode := range []string{"subreaper", "pid1"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "pid1" {
				requirePIDNamespace(t)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					dir := scriptDir(t, tc.script)
					out := filepath.Join(dir, "out")
					cmd := wrapperCommand(t, mode, dir, tc.env...)
					r := startRun(t, cmd)
					if mode == "subreaper" {
						// In a namespace, killing unshare ends everything (--kill-child).
						t.Cleanup(func() { killRecorded(dir, "grandchild.pid", "agent.pid") })
					}
					pid := wrapperPID(t, mode, cmd)
					if tc.sigterm {
						// Signal once the grandchild has its trap.
						waitFile(t, filepath.Join(out, "grandchild.pid"))
						if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
							t.Fatal(err)
						}
						if tc.check != nil {
							waitFile(t, filepath.Join(out, "grandchild"))
						}
					}
					if code := r.wait(t); code != tc.code {
						t.Fatalf("wrapper exit code = %d, want the agent's %d", code, tc.code)
					}
					inside := pid // the wrapper's PID as the agent sees it
					if mode == "pid1" {
						inside = 1
					}
					if tc.check != nil {
						tc.check(t, out, inside)
					}
					exited := r.waitLog(t, "agent exited")
					if reaped, _ := exited["orphans_reaped"].(float64); exited["exit_code"] != float64(tc.code) || reaped < tc.orphans {
						t.Fatalf("agent exited line = %v, want exit_code %d and orphans_reaped >= %v", exited, tc.code, tc.orphans)
					}
				})
			}
		})
	}
}

// TestWrapperIsNotDumpable: the agent runs as the wrapper's UID; it must not read the wrapper's
// /proc/<pid>/environ (nor attach to it, the same kernel check). Root passes that check anyway,
// so when the test runs as root the wrapper and agent run as UID 65532 (the agent image's user).
func TestWrapperIsNotDumpable(t *testing.T) {
	const uid = 65532
	dir := scriptDir(t, `#!/bin/bash
out=$PID1_TEST_DIR
cat "/proc/$PPID/environ" > /dev/null 2> "$out/environ.err"
echo $? > "$out/environ.rc"
`)
	out := filepath.Join(dir, "out")
	cmd := wrapperCommand(t, "subreaper", dir, "TATARA_WRAPPER_LINGER=2m")
	asUser := os.Getuid()
	if asUser == 0 {
		asUser = uid
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		for _, d := range []string{"state", "work", "home", "out"} {
			if err := os.Chown(filepath.Join(dir, d), uid, uid); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := startRun(t, cmd)
	addr := r.waitLog(t, "metrics server listening")["addr"].(string)
	r.waitLog(t, "agent exited")

	rc := strings.TrimSpace(readFile(t, filepath.Join(out, "environ.rc")))
	if rc == "0" {
		t.Fatalf("the agent (UID %d) read the wrapper's /proc/<pid>/environ", asUser)
	}
	if msg := readFile(t, filepath.Join(out, "environ.err")); !strings.Contains(msg, "Permission denied") {
		t.Fatalf("reading the wrapper's environ failed with %q (exit %s), want Permission denied", msg, rc)
	}
	// The files in a non-dumpable process's /proc/<pid> belong to root, whatever its UID.
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/environ", &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Fatalf("/proc/<wrapper>/environ belongs to UID %d, want 0 (not dumpable)", st.Uid)
	}
	// The wrapper still reads its own /proc for the process metrics.
	if code, body := httpGet(t, "http://"+addr+"/metrics"); code != 200 || !strings.Contains(body, "process_open_fds ") {
		t.Fatalf("GET /metrics = %d without process_open_fds: %.500s", code, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("wrapper exit code = %d, want 0", code)
	}
}

// scriptDir returns a directory every user can read, holding the wrapper binary, the agent
// script and the directories of one run (out/ is where the script writes).
func scriptDir(t *testing.T, script string) string {
	t.Helper()
	wrapper, _ := build(t)
	dir, err := os.MkdirTemp("", "wrapper-pid1-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state", "work", "home", "out"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy: the shared build lives in a directory only its owner can enter.
	src, err := os.Open(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(filepath.Join(dir, "wrapper"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wrapperCommand runs dir's wrapper with dir's agent script: directly (mode "subreaper") or as
// PID 1 of a new PID namespace with its own /proc (mode "pid1").
func wrapperCommand(t *testing.T, mode, dir string, env ...string) *exec.Cmd {
	t.Helper()
	args := []string{filepath.Join(dir, "wrapper"), "--metrics-addr", "127.0.0.1:0", "--poll-interval", "20ms"}
	if mode == "pid1" {
		// --kill-child: if the test kills unshare, the namespace goes with it.
		args = append([]string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = filepath.Join(dir, "work")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
		"TATARA_DIRECTIVE=run", "TATARA_AGENT_COMMAND=" + filepath.Join(dir, "agent.sh"),
		"TATARA_WRAPPER_STATE_DIR=" + filepath.Join(dir, "state"),
		"TATARA_MCP_URL=" + mcpListener(t),
		"PID1_TEST_DIR=" + filepath.Join(dir, "out"),
	}, env...)
	return cmd
}

// wrapperPID returns the wrapper's PID as the test sees it: the command's, or in a namespace the
// one child of unshare.
func wrapperPID(t *testing.T, mode string, cmd *exec.Cmd) int {
	t.Helper()
	if mode != "pid1" {
		return cmd.Process.Pid
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if kids := childrenOf(cmd.Process.Pid); len(kids) == 1 {
			return kids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare (PID %d) never started the wrapper", cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOf lists the PIDs whose parent is pid (from /proc/<pid>/stat).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if k, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

var (
	pidnsOnce sync.Once
	pidnsErr  error
)

// requirePIDNamespace skips unless `unshare --pid --fork --mount-proc` works here (it needs root
// or a user namespace).
func requirePIDNamespace(t *testing.T) {
	t.Helper()
	pidnsOnce.Do(func() {
		out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "true").CombinedOutput()
		if err != nil {
			pidnsErr = errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
		}
	})
	if pidnsErr != nil {
		t.Skipf("cannot create a PID namespace here (unshare --pid --fork --mount-proc needs root): %v", pidnsErr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killRecorded kills the processes whose PIDs the script recorded in dir/out, so a failed run
// leaves nothing behind (a grandchild the wrapper never signalled loops forever). A PID is killed
// only while its command line still names dir, so a reused PID is left alone.
func killRecorded(dir string, names ...string) {
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, "out", n))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			continue
		}
		if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.Contains(string(cmdline), dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
