// Command cp copies one file to a destination path, keeping its permission bits. It ships in the
// FROM-scratch wrapper image: the operator's wrapper-install init container runs
// `cp /usr/local/bin/wrapper /opt/tatara/wrapper` to put the static wrapper into a Project's agent
// image, whose main container then runs it.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: cp SOURCE DEST")
		os.Exit(2)
	}
	if err := copyFile(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "cp:", err)
		os.Exit(1)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open source %q: %w", src, err)
	}
	defer func() { _ = in.Close() }() // read-only: a close error loses nothing
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("failed to stat source %q: %w", src, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("failed to copy %q: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("failed to create %q: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("failed to copy %q to %q: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("failed to write %q: %w", dst, err)
	}
	// O_CREATE applies the umask; set the source's bits exactly so an executable stays executable.
	if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
		return fmt.Errorf("failed to set the mode of %q: %w", dst, err)
	}
	return nil
}
