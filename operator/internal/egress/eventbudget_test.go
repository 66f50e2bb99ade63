package egress

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/operator/internal/egress/allowlist"
)

// TestEventBudget: one Task's flood of refusals writes a burst of Events and then one a minute,
// whatever the hosts; another Task keeps its own budget; and all Tasks together are bounded too.
func TestEventBudget(t *testing.T) {
	b := newEventBudget()
	t0 := time.Unix(0, 0)
	written := 0
	for range 1000 {
		if b.allow("flooder", t0) {
			written++
		}
	}
	if written != taskEventBurst {
		t.Errorf("a flood from one Task wrote %d Events at once, want %d", written, taskEventBurst)
	}
	if !b.allow("other", t0) {
		t.Error("another Task's first Event was suppressed by the flood")
	}
	if b.allow("flooder", t0.Add(taskEventEvery/2)) {
		t.Error("the flooder got an Event before its next one was due")
	}
	if !b.allow("flooder", t0.Add(taskEventEvery)) {
		t.Error("the flooder got no Event once its next one was due")
	}

	// Overall: many Tasks at once get at most the overall burst.
	b = newEventBudget()
	written = 0
	for i := range 100 {
		if b.allow(fmt.Sprint("task-", i), t0) {
			written++
		}
	}
	if written != overallEventBurst {
		t.Errorf("100 Tasks at once wrote %d Events, want the overall burst %d", written, overallEventBurst)
	}
}

// TestEventsPastTheBudgetAreCountedNotWritten: past its budget a Task's refusals are still
// logged and counted, and the Events not written are counted as suppressed.
func TestEventsPastTheBudgetAreCountedNotWritten(t *testing.T) {
	h := &harness{metrics: NewMetrics(prometheusRegistry(), "demo"), logs: &syncBuffer{}, events: &fakeRecorder{}}
	r := &reporter{project: "demo", namespace: "ns", log: discardLog(), metrics: h.metrics,
		identify: fakeIdentities{localhost: agentA}, events: h.events, budget: newEventBudget()}
	const tries = 50
	for i := range tries {
		r.denied(context.Background(), localhost, refuse(fmt.Sprintf("h%d.test", i), 443, allowlist.ReasonNotAllowed))
	}
	if n := len(h.events.all()); n != taskEventBurst {
		t.Errorf("%d Events, want %d", n, taskEventBurst)
	}
	if n := testutil.ToFloat64(h.metrics.EventsSuppressed); n != tries-taskEventBurst {
		t.Errorf("events_suppressed_total = %v, want %d", n, tries-taskEventBurst)
	}
	if n := requests(h, DecisionDenied, allowlist.ReasonNotAllowed); n != tries {
		t.Errorf("requests_total{denied,not_allowed} = %v, want %d", n, tries)
	}
	// A pool pod (no Task) and an unknown source: counted, no Event.
	r.identify = fakeIdentities{localhost: {Pod: "pool-pod"}}
	r.denied(context.Background(), localhost, refuse("x.test", 443, allowlist.ReasonNotAllowed))
	r.denied(context.Background(), netip.MustParseAddr("127.0.0.9"), refuse("x.test", 443, allowlist.ReasonNotAllowed))
	if n := len(h.events.all()); n != taskEventBurst {
		t.Errorf("refusals without a Task wrote Events: %d", n-taskEventBurst)
	}
}
