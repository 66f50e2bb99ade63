package modelgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"tatara.dev/cli/pkg/modelusage"
	"tatara.dev/cli/pkg/redact"
)

// The pod's totals: every response's usage added, the usage file rewritten, the budget checked.

// finish counts a forwarded request once its response has been passed on (or the upstream
// failed), once: its metrics, its usage into the pod's totals, the usage file, one log line.
func (x *exchange) finish() {
	g := x.g
	if x.code == 0 { // no response and no error answer: nothing the agent could use
		x.code = http.StatusBadGateway
	}
	var r reading
	if x.meter != nil {
		r = x.meter.result()
	}
	elapsed := time.Since(x.start)
	model := g.metrics.modelLabel(r.model)
	g.metrics.observe(model, x.code, elapsed)
	if r.usage != (apiUsage{}) {
		g.metrics.addTokens(model, r.usage)
	}
	if first := x.firstByte; !x.headersAt.IsZero() {
		if first.IsZero() {
			first = x.headersAt
		}
		g.metrics.ttfb.Observe(first.Sub(x.start).Seconds())
	}

	u := modelusage.Usage{Requests: 1, InputTokens: r.usage.InputTokens, OutputTokens: r.usage.OutputTokens,
		CacheCreationInputTokens: r.usage.CacheCreationInputTokens, CacheReadInputTokens: r.usage.CacheReadInputTokens}
	g.mu.Lock()
	g.usage = g.usage.Add(u)
	err := g.writeUsage()
	g.mu.Unlock()
	if err != nil {
		g.log.Error("failed to write the usage file", "error", err.Error())
	}

	attrs := []any{"path", x.path, "status", x.code, "model", r.model, "input_tokens", u.InputTokens, "output_tokens", u.OutputTokens,
		"cache_creation_input_tokens", u.CacheCreationInputTokens, "cache_read_input_tokens", u.CacheReadInputTokens,
		"duration", elapsed.Round(time.Millisecond).String()}
	level := slog.LevelInfo
	if x.code >= 400 || r.errType != "" { // a stream may end in an error event after a 200
		level = slog.LevelWarn
		// The upstream's own message, masked (before it is cut, which could leave part of the
		// credential): no model API echoes it, but no one upstream gets to write it in this log.
		attrs = append(attrs, "error_type", r.errType, "error", redact.Truncate(strings.ReplaceAll(r.errMessage, g.credential, "[REDACTED]")))
	}
	if r.unmetered != "" {
		level = slog.LevelWarn
		attrs = append(attrs, "unmetered", r.unmetered)
	}
	g.log.Log(context.Background(), level, "model request", attrs...)
}

// budgetSpent reports whether the Task's token budget is spent, with the Task's tokens so far.
// Once it is, the usage file says so.
func (g *Gateway) budgetSpent() (used int64, spent bool) {
	if g.budget <= 0 {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	used = g.used + g.usage.Tokens()
	if used < g.budget {
		return used, false
	}
	g.usage.BudgetExceeded = true
	if err := g.writeUsage(); err != nil {
		g.log.Error("failed to write the usage file", "error", err.Error())
	}
	return used, true
}

// Usage returns this pod's totals so far.
func (g *Gateway) Usage() modelusage.Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usage
}

// writeUsage writes the totals to the usage file, g.mu held. The new report is written over the
// old one in one write, then the file is cut to its length: the counts never shrink, so neither
// does the report, and a reader finds the old report or the new one, never a mix nor an empty
// file. (No temporary file renamed into place: the termination log is a bind mount, which a
// rename cannot replace.)
func (g *Gateway) writeUsage() error {
	if g.usageFile == "" {
		return nil
	}
	b, err := json.Marshal(g.usage)
	if err != nil {
		return fmt.Errorf("failed to encode the usage: %w", err)
	}
	f, err := os.OpenFile(g.usageFile, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("failed to write the usage file (--usage-file): %w", err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to write the usage file (--usage-file): %w", err)
	}
	return nil
}
