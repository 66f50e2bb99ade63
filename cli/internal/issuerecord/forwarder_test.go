package issuerecord

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/pkg/internalissue"
	"tatara.dev/testkit/testutil"
)

// outcomes counts a Forwarder's outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) count(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

func newForwarder(t *testing.T, url string, cfg Config) (*Forwarder, *outcomes) {
	t.Helper()
	o := &outcomes{}
	cfg.Operator = &backend.Client{Name: "operator", BaseURL: url, Token: "tatara_token"}
	cfg.Task = "impl-1"
	cfg.Count = o.count
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	return New(cfg), o
}

var report = internalissue.Report{Category: "tool_error", Severity: "warn", Description: "memory_search timed out", OffendingTool: "memory_search"}

// TestForwarderRecordsOnceThroughAnOutage: a report the operator does not take (503 during a
// rollout) is sent again with the same idempotency key until it is taken, and counted recorded once.
func TestForwarderRecordsOnceThroughAnOutage(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var body internalissue.Report
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get(backend.IdempotencyKeyHeader))
		if r.URL.Path != "/api/v1/tasks/impl-1/internal-issues" || r.Header.Get("Authorization") != "Bearer tatara_token" {
			t.Errorf("request %s %s with %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		if len(keys) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	f, o := newForwarder(t, srv.URL, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	go f.Run(ctx)
	f.Send(report)
	testutil.WaitFor(t, "the report recorded", func() bool { return o.get(OutcomeRecorded) == 1 })
	cancel()
	<-f.Done()
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 4 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] || keys[2] != keys[3] {
		t.Fatalf("keys %q: want 4 tries with one key", keys)
	}
	if body != report {
		t.Fatalf("body %+v, want %+v", body, report)
	}
}

// TestForwarderOutcomes: what the operator answers decides the outcome, and a refusal is not
// tried again.
func TestForwarderOutcomes(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{http.StatusCreated, OutcomeRecorded},
		{http.StatusOK, OutcomeRecorded},
		{http.StatusTooManyRequests, OutcomeRateLimited},
		{http.StatusBadRequest, OutcomeRefused},
		{http.StatusNotFound, OutcomeRefused}, // an operator from before the endpoint
		{http.StatusUnauthorized, OutcomeRefused},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			var mu sync.Mutex
			tries := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				tries++
				mu.Unlock()
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			f, o := newForwarder(t, srv.URL, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			go f.Run(ctx)
			f.Send(report)
			testutil.WaitFor(t, "the outcome "+tt.want, func() bool { return o.get(tt.want) == 1 })
			cancel()
			<-f.Done()
			mu.Lock()
			defer mu.Unlock()
			if tries != 1 {
				t.Fatalf("%d tries, want 1", tries)
			}
		})
	}
}

// TestSendNeverBlocks: with no one sending, Send still returns at once; past the queue's room a
// report is dropped and counted, never waited for.
func TestSendNeverBlocks(t *testing.T) {
	f, o := newForwarder(t, "http://127.0.0.1:1", Config{Queue: 2})
	for range 5 {
		f.Send(report) // Run never started: a blocking Send would hang the test
	}
	if got := o.get(OutcomeDropped); got != 3 {
		t.Fatalf("dropped %d, want 3 (5 sent, room for 2)", got)
	}
}

// TestStopSendsWhatIsQueued: the reports queued when the process is told to stop are still sent.
func TestStopSendsWhatIsQueued(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	defer srv.Close()
	f, o := newForwarder(t, srv.URL, Config{})
	for range 3 {
		f.Send(report)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before Run took any
	f.Run(ctx)
	if got := o.get(OutcomeRecorded); got != 3 {
		t.Fatalf("recorded %d, want the 3 queued", got)
	}
}

// TestStopEndsAnOutageWithinDrainFor: a report the operator never takes is given up DrainFor
// after the stop, logged and counted dropped, not tried for the rest of RetryFor.
func TestStopEndsAnOutageWithinDrainFor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	f, o := newForwarder(t, srv.URL, Config{RetryFor: time.Hour, DrainFor: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go f.Run(ctx)
	f.Send(report)
	f.Send(report)
	cancel()
	select {
	case <-f.Done():
	case <-time.After(time.Minute): // far past DrainFor: only a forwarder that ignores the stop gets here
		t.Fatal("Run did not return after the stop")
	}
	if got := o.get(OutcomeDropped); got != 2 {
		t.Fatalf("dropped %d, want 2", got)
	}
}
