// Package issuerecord sends the agent's report_internal_issue reports to the operator, which keeps
// them as durable, deduplicated records (InternalIssue). The tool's handler has logged and counted
// a report before it gets here, and hands it over without waiting: a slow or absent operator
// delays no tool call. Each report keeps one idempotency key across all its tries, so the operator
// counts it once however often it is sent (a retry during an operator rollout). Every report ends
// in one outcome, logged unless recorded and counted in tatara_mcp_internal_issue_records_total.
package issuerecord

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/internalissue"
)

// Outcomes of a report (the counter's outcome label).
const (
	OutcomeRecorded    = "recorded"     // the operator counted it
	OutcomeRateLimited = "rate_limited" // the operator's per-Task report limit refused it (429)
	OutcomeRefused     = "refused"      // the operator refused it for good (another 4xx, e.g. an operator without the endpoint)
	OutcomeFailed      = "failed"       // the operator did not take it within RetryFor
	OutcomeDropped     = "dropped"      // the queue was full, or the process stopped before it was sent
)

// Outcomes lists every outcome, for the counter's zero series.
var Outcomes = []string{OutcomeRecorded, OutcomeRateLimited, OutcomeRefused, OutcomeFailed, OutcomeDropped}

// Defaults of Config.
const (
	// DefaultQueue is how many reports may wait to be sent; an agent reporting faster than the
	// operator answers has its excess dropped (logged and counted), not held without bound.
	DefaultQueue = 64
	// DefaultRetryFor is how long one report is tried: longer than an operator rollout.
	DefaultRetryFor = 2 * time.Minute
	// DefaultDrainFor is how long the reports still waiting are tried once the process is told to
	// stop (within the pod's termination grace period).
	DefaultDrainFor = 5 * time.Second
)

// Config configures a Forwarder.
type Config struct {
	// Operator is the operator backend with the Task's token (backend.TaskClients).
	Operator *backend.Client
	// Task is the reporting Task's name (the route's {task}).
	Task string
	// Log receives one line per report not recorded.
	Log *slog.Logger
	// Count counts each report's outcome; nil counts nothing.
	Count func(outcome string)
	// Queue, RetryFor and DrainFor: 0 means their Default.
	Queue    int
	RetryFor time.Duration
	DrainFor time.Duration
	// Backoff is the first wait between two sends of one report, doubled up to 16 times it; 0
	// means one second.
	Backoff time.Duration
}

// Forwarder sends reports to the operator in the background, one at a time, in their order.
type Forwarder struct {
	cfg   Config
	queue chan pending
	done  chan struct{}
}

type pending struct {
	report internalissue.Report
	key    string
}

// New returns a Forwarder; Run sends what Send queues.
func New(cfg Config) *Forwarder {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Count == nil {
		cfg.Count = func(string) {}
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if cfg.DrainFor <= 0 {
		cfg.DrainFor = DefaultDrainFor
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	return &Forwarder{cfg: cfg, queue: make(chan pending, cfg.Queue), done: make(chan struct{})}
}

// Send queues a report and returns at once; a full queue drops it (logged and counted).
func (f *Forwarder) Send(r internalissue.Report) {
	select {
	case f.queue <- pending{report: r, key: backend.NewIdempotencyKey()}:
	default:
		f.end(r, OutcomeDropped, "the queue of reports waiting for the operator is full", nil)
	}
}

// Done is closed when Run has returned.
func (f *Forwarder) Done() <-chan struct{} { return f.done }

// Run sends the queued reports until ctx ends; then the report being sent and those still queued
// get DrainFor in all, and what is left is dropped (logged and counted).
func (f *Forwarder) Run(ctx context.Context) {
	defer close(f.done)
	for {
		select {
		case p := <-f.queue:
			f.deliver(ctx.Done(), p, time.Now().Add(f.cfg.RetryFor))
		case <-ctx.Done():
			f.drain(time.Now().Add(f.cfg.DrainFor))
			return
		}
	}
}

func (f *Forwarder) drain(deadline time.Time) {
	stopped := make(chan struct{})
	close(stopped)
	for {
		select {
		case p := <-f.queue:
			f.deliver(stopped, p, deadline)
		default:
			return
		}
	}
}

// deliver sends one report until it is recorded or refused, or its deadline passes; once stop is
// closed it has DrainFor left at most.
func (f *Forwarder) deliver(stop <-chan struct{}, p pending, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// Once stop is closed, the report has DrainFor left at most.
	go func() {
		select {
		case <-stop:
			t := time.AfterFunc(f.cfg.DrainFor, cancel)
			<-ctx.Done()
			t.Stop()
		case <-ctx.Done():
		}
	}()
	req := catalog.Request{Method: http.MethodPost, Path: internalissue.PathFor(f.cfg.Task), Body: map[string]any{
		"category": p.report.Category, "severity": p.report.Severity, "description": p.report.Description,
		"offending_tool": p.report.OffendingTool, "resource_id": p.report.ResourceID}}
	wait := f.cfg.Backoff
	for {
		_, err := f.cfg.Operator.DoWithKey(ctx, req, p.key)
		var status *backend.StatusError
		switch {
		case err == nil:
			f.end(p.report, OutcomeRecorded, "", nil)
			return
		case errors.As(err, &status) && status.Status == http.StatusTooManyRequests:
			f.end(p.report, OutcomeRateLimited, "the operator's limit of reports per Task refused it", err)
			return
		case errors.As(err, &status) && status.Status < 500:
			f.end(p.report, OutcomeRefused, "the operator refused it", err)
			return
		}
		// Not taken yet (the operator unreachable, restarting, or failing): the same key again.
		select {
		case <-ctx.Done():
			select {
			case <-stop:
				f.end(p.report, OutcomeDropped, "the process stopped before the operator took it", err)
			default:
				f.end(p.report, OutcomeFailed, "the operator did not take it in time", err)
			}
			return
		case <-time.After(rand.N(wait) + wait/2):
			wait = min(2*wait, 16*f.cfg.Backoff)
		}
	}
}

// end logs a report that was not recorded, and counts every report's outcome.
func (f *Forwarder) end(r internalissue.Report, outcome, why string, err error) {
	f.cfg.Count(outcome)
	if outcome == OutcomeRecorded {
		return
	}
	attrs := []any{"outcome", outcome, "reason", why, "category", r.Category, "severity", r.Severity, "offending_tool", r.OffendingTool}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	f.cfg.Log.Warn("internal issue not recorded by the operator", attrs...)
}
