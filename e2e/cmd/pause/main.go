// Command pause is the pod sandbox ("infra") process of the locally built kind node image: it
// holds the pod's namespaces open, reaps the zombies handed to it as PID 1, and exits on
// SIGINT/SIGTERM. It replaces the upstream pause image, which cannot be pulled on air-gapped machines.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped at build time with -ldflags "-X main.version=..." (hack/k8s-binaries.sh).
var version = "unknown"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause", version)
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Said once the signals are caught: until then a stop kills the process instead of ending it
	// with 0 (a sandbox's output goes nowhere; the tests wait for this line).
	fmt.Println("pause", version, "ready")
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			// Exit code 0 matches upstream pause: a stop is the normal end of a sandbox.
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child so that orphans re-parented to PID 1 do not stay zombies.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
