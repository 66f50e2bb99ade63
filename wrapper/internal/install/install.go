// Package install copies the running wrapper binary into the agent pod's shared volume, from where
// the Project's agent image runs it: the wrapper image's first init container does it
// (`workspace-init --install-to`, or `wrapper install` for a Task without a repository), so the
// wrapper is never built into an agent image and always matches the tatara-wrapper chart's.
package install

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// Exit codes of `wrapper install`.
const (
	ExitFailed = 1
	ExitUsage  = 2
)

// Self copies this executable to dst, whose directory must exist. The copy is written under a
// temporary name in that directory and renamed into place, so nothing ever runs a partial copy.
func Self(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find this executable: %w", err)
	}
	return Copy(self, dst)
}

// Copy copies the executable src to dst as Self does; dst ends up mode 0555.
func Copy(src, dst string) (err error) {
	if dst == "" || !filepath.IsAbs(dst) {
		return fmt.Errorf("invalid install path %q: it must be absolute", dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return fmt.Errorf("failed to install into %s: %w", filepath.Dir(dst), err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return fmt.Errorf("failed to copy %s to %s: %w", src, tmp.Name(), err)
	}
	if err = tmp.Chmod(0o555); err != nil {
		return fmt.Errorf("failed to make %s executable: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("failed to install %s: %w", dst, err)
	}
	return nil
}

// Main is `wrapper install DEST`: the wrapper-install init container of an agent pod whose Task
// names no repository.
func Main(args []string, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With(slog.String("step", "install"))
	if len(args) != 1 {
		log.Error("invalid arguments", slog.Any("error", errors.New("usage: wrapper install DEST")), slog.Any("args", args))
		return ExitUsage
	}
	if err := Self(args[0]); err != nil {
		log.Error("wrapper not installed", slog.Any("error", err))
		return ExitFailed
	}
	log.Info("wrapper installed", slog.String("path", args[0]))
	return 0
}
