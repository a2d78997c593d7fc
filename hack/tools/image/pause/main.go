// Command pause is the sandbox ("pause") container of Lifeboat's test
// node: containerd starts it first in every pod, as PID 1 of the pod's PID
// namespace, to hold the pod's namespaces open. It does nothing but wait
// for SIGINT or SIGTERM (then exits 0) and reap the zombies of processes
// that become its children: with a shared PID namespace, orphans of the
// pod's containers are reparented to it, and a PID 1 that never waits for
// them would fill the process table.
//
// Its version is in the file VERSION, which the image builder also reads
// for the image's tag: change it when this program changes.
package main

import (
	_ "embed"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

//go:embed VERSION
var version string

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause", strings.TrimSpace(version))
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Said once the handlers are in place: before that, the Go runtime's
	// default would end the process on SIGTERM with a signal, not exit 0.
	fmt.Fprintf(os.Stderr, "pause %s: waiting for SIGINT or SIGTERM\n", strings.TrimSpace(version))
	// A child may have exited before Notify took effect; its SIGCHLD
	// would be lost, so reap once up front.
	reapAll()
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reapAll()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", sig)
		os.Exit(0)
	}
}

// reapAll waits for every child that has exited, without blocking, and
// returns their process ids. Signals coalesce (one SIGCHLD may stand for
// several exits), hence the loop until no exited child is left.
func reapAll() []int {
	var reaped []int
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil { // 0: children left, none exited; ECHILD: no children
			return reaped
		}
		reaped = append(reaped, pid)
	}
}
