// Package steps prints what an e2e run does and how long each step took, for the suite and for
// `make kind-smoke`: one line when a step starts, one when it ends, with its wall time.
package steps

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// Log prints lines prefixed with its name, the UTC time and the seconds since it was made.
type Log struct {
	name  string
	start time.Time
	out   io.Writer
	done  []string
}

// New returns a Log named name, writing to stderr, its clock started now.
func New(name string) *Log { return &Log{name: name, start: time.Now(), out: os.Stderr} }

// Printf prints one line.
func (l *Log) Printf(format string, args ...any) {
	_, _ = fmt.Fprintf(l.out, "[%s %s +%4ds] %s\n", l.name, time.Now().UTC().Format("15:04:05"), int(l.Since().Seconds()), fmt.Sprintf(format, args...))
}

// Start is when the Log was made.
func (l *Log) Start() time.Time { return l.start }

// Since is the time since the Log was made.
func (l *Log) Since() time.Duration { return time.Since(l.start) }

// Step wraps fn so that the run prints what it does and how long it took; onFail (may be nil)
// runs when fn fails, before the error is returned.
func (l *Log) Step(name string, fn env.Func, onFail func(context.Context, *envconf.Config)) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		l.Printf("phase %s ...", name)
		start := time.Now()
		ctx, err := fn(ctx, cfg)
		took := time.Since(start).Round(time.Second)
		if err != nil {
			l.Printf("phase %s FAILED after %s: %v", name, took, err)
			if onFail != nil {
				onFail(ctx, cfg)
			}
			return ctx, fmt.Errorf("phase %s: %w", name, err)
		}
		l.Printf("phase %s: ok in %s", name, took)
		l.done = append(l.done, fmt.Sprintf("%-58s %5s", name, took))
		return ctx, nil
	}
}

// Summary is one line per step that succeeded, with its time, in the order they ran.
func (l *Log) Summary() string { return "  " + strings.Join(l.done, "\n  ") }
