package egress

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Event budgets: every refusal is logged and counted, but an agent that tries a thousand hosts
// must not write a thousand Events. client-go's events.k8s.io recorder only folds identical
// Events into a series (a new host is a new Event) and spends a goroutine on each, so the bound
// is ours: per Task a burst, then one a minute; over all Tasks a burst, then one a second.
const (
	taskEventBurst    = 5
	taskEventEvery    = time.Minute
	overallEventBurst = 20
	overallEventEvery = time.Second
	// maxEventBudgets bounds the per-Task buckets kept; past it, full ones are dropped (a full
	// bucket is the same as none).
	maxEventBudgets = 1024
)

type eventBudget struct {
	mu      sync.Mutex
	perTask map[string]*rate.Limiter
	overall *rate.Limiter
}

func newEventBudget() *eventBudget {
	return &eventBudget{perTask: map[string]*rate.Limiter{},
		overall: rate.NewLimiter(rate.Every(overallEventEvery), overallEventBurst)}
}

// allow spends one Event of task's budget and the overall budget; false means none is left.
func (b *eventBudget) allow(task string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.perTask[task]
	if !ok {
		if len(b.perTask) >= maxEventBudgets {
			for k, v := range b.perTask {
				if v.TokensAt(now) >= taskEventBurst {
					delete(b.perTask, k)
				}
			}
			if len(b.perTask) >= maxEventBudgets {
				return false
			}
		}
		l = rate.NewLimiter(rate.Every(taskEventEvery), taskEventBurst)
		b.perTask[task] = l
	}
	// The Task's token is only spent when the overall budget has one too.
	if l.TokensAt(now) < 1 || !b.overall.AllowN(now, 1) {
		return false
	}
	return l.AllowN(now, 1)
}
