package pid1

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes this process adopt the orphans of its descendants
// (PR_SET_CHILD_SUBREAPER), so it reaps them when it is not PID 1 too (a pod that shares its
// process namespace, a test).
func SetChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("failed to become a child subreaper (prctl PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// IsChildSubreaper reports PR_GET_CHILD_SUBREAPER.
func IsChildSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, fmt.Errorf("failed to read PR_GET_CHILD_SUBREAPER: %w", err)
	}
	return v != 0, nil
}

// SetNotDumpable clears this process's dumpable flag (PR_SET_DUMPABLE 0): a process of the same
// UID without CAP_SYS_PTRACE, such as the agent, can then neither ptrace it nor open its
// /proc/<pid>/environ or mem, and no core dump is written. The agent's own flag is set again
// when it execs, so the agent is not affected.
func SetNotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("failed to make the process not dumpable (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// Dumpable reports PR_GET_DUMPABLE.
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		return false, fmt.Errorf("failed to read PR_GET_DUMPABLE: %w", err)
	}
	return v != 0, nil
}
