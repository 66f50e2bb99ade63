// Package pid1 is what the wrapper owes as the agent container's main process (PID 1): it reaps
// every child, the orphans the agent leaves behind included (a subreaper when it is not PID 1),
// and it keeps its own memory and environment out of the agent's reach (not dumpable). The agent
// runs arbitrary code as the wrapper's UID, so nothing here trusts it.
package pid1

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reaper waits for every child of this process (wait4(-1)) and hands the exit status of a child
// started through Start to whoever waits for it; any other child is an orphan, reaped and counted.
// There is one per process, because wait4(-1) takes any child's status: once it runs, a child
// started by other means (exec.Cmd.Wait) would lose its status to it.
type Reaper struct {
	// mu is held while a child is started and registered, and while children are reaped, so a
	// child that exits at once is still delivered to its waiter and not taken for an orphan.
	mu      sync.Mutex
	waiting map[int]chan<- unix.WaitStatus
	orphans atomic.Int64
}

var processReaper = sync.OnceValue(func() *Reaper {
	r := &Reaper{waiting: map[int]chan<- unix.WaitStatus{}}
	// SIGCHLD is caught before the first sweep, so no exit goes unnoticed; signals coalesce,
	// so each one sweeps until no exited child is left.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		r.reap()
		for range sigs {
			r.reap()
		}
	}()
	return r
})

// ProcessReaper returns this process's reaper, started on first use. From then on, every child
// of the process must be started with its Start.
func ProcessReaper() *Reaper { return processReaper() }

// Start starts cmd and returns a channel that receives its wait status once it exited. The
// caller must not call cmd.Wait.
func (r *Reaper) Start(cmd *exec.Cmd) (<-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}

// Orphans is how many children not started by Start were reaped so far.
func (r *Reaper) Orphans() int64 { return r.orphans.Load() }

// reap collects every child that has exited, without blocking.
func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no child; 0: none has exited
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			delete(r.waiting, pid)
			ch <- ws
			continue
		}
		r.orphans.Add(1)
	}
}
