//go:build !linux

package pid1

import (
	"fmt"
	"runtime"
)

// The agent container is Linux; elsewhere (a developer's machine) these only report that.

var errUnsupported = fmt.Errorf("prctl is not available on %s", runtime.GOOS)

// SetChildSubreaper is Linux only.
func SetChildSubreaper() error { return errUnsupported }

// IsChildSubreaper is Linux only.
func IsChildSubreaper() (bool, error) { return false, errUnsupported }

// SetNotDumpable is Linux only.
func SetNotDumpable() error { return errUnsupported }

// Dumpable is Linux only.
func Dumpable() (bool, error) { return true, errUnsupported }
