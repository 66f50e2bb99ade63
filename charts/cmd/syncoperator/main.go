// Command syncoperator copies the operator's generated CRDs and RBAC rules into the
// tatara-operator chart (see package tatara.dev/charts/internal/opsync). `make generate` runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"tatara.dev/charts/internal/opsync"
)

func main() {
	root := flag.String("root", ".", "repository root")
	check := flag.Bool("check", false, "only report stale files")
	flag.Parse()
	if *check {
		if err := opsync.Check(*root); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	written, err := opsync.Write(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sync-crds:", err)
		os.Exit(1)
	}
	for _, w := range written {
		fmt.Println("sync-crds: wrote", w)
	}
}
