// Command pins checks and bumps the release pins (see package tatara.dev/charts/internal/pins).
//
//	pins check [--root DIR] [--images "tatara-cli:0.1.0 ..."]
//	pins bump  [--root DIR] --component cli|wrapper|operator|agent --version x.y.z
//	pins version [--root DIR] --component cli|wrapper|operator|agent
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"tatara.dev/charts/internal/pins"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprintln(stderr, "usage: pins check|bump|version [flags]")
		return 2
	}
	fs := flag.NewFlagSet("pins "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "repository root")
	images := fs.String("images", "", "space-separated image references make images builds (check)")
	component := fs.String("component", "", "component to bump: cli, wrapper, operator or agent")
	version := fs.String("version", "", "new version x.y.z (bump)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch args[0] {
	case "check":
		st, err := pins.Load(*root)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "check-pins: %v\n", err)
			return 1
		}
		var refs []string
		if *images != "" {
			refs = strings.Fields(*images)
		}
		if err := st.Check(refs); err != nil {
			_, _ = fmt.Fprintf(stderr, "check-pins: %v\n", err)
			if errors.Is(err, pins.ErrMismatch) {
				_, _ = fmt.Fprintln(stderr, "fix: make bump COMPONENT=<cli|wrapper|operator|agent> VERSION=<x.y.z> moves every pin of a component together")
			}
			return 1
		}
		for _, c := range pins.Components {
			from := "charts " + strings.Join(c.Charts, "+")
			if c.VersionVar != "" {
				from = pins.VersionsEnvPath + " " + c.VersionVar
			}
			_, _ = fmt.Fprintf(stdout, "check-pins: %s %s ok (%s, images %s)\n", c.Name, st.Version(c), from, strings.Join(c.Images, "+"))
		}
		for _, img := range pins.PinnedImages {
			_, _ = fmt.Fprintf(stdout, "check-pins: image %s %s ok (%s %s, %s)\n", img.Name, st.PinnedVersion(img), pins.VersionsEnvPath, img.VersionVar, pins.MonitoringValuesPath)
		}
		return 0
	case "bump":
		c, err := pins.ComponentByName(*component)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "bump: %v\n", err)
			return 2
		}
		files, err := pins.Bump(*root, c, *version)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "bump: %v\n", err)
			return 1
		}
		st, err := pins.Load(*root)
		if err == nil {
			err = st.Check(nil)
		}
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "bump: pins disagree after the bump: %v\n", err)
			return 1
		}
		_, _ = fmt.Fprintf(stdout, "bump: %s -> %s in %s\n", c.Name, *version, strings.Join(files, " "))
		return 0
	case "version":
		c, err := pins.ComponentByName(*component)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "version: %v\n", err)
			return 2
		}
		st, err := pins.Load(*root)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "version: %v\n", err)
			return 1
		}
		_, _ = fmt.Fprintln(stdout, st.Version(c))
		return 0
	default:
		_, _ = fmt.Fprintf(stderr, "unknown command %q: want check, bump or version\n", args[0])
		return 2
	}
}
