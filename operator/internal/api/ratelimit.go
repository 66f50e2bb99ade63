package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// The per-Task rate limit: every authenticated request takes one token from its Task's bucket
// (golang.org/x/time/rate), keyed by the Task's UID, before any work is done for it. A misbehaving
// agent looping on a tool then costs the operator and the API server at most its own share, and
// gets 429 with Retry-After instead of slowing every other agent down.

// Defaults of --api-rate-limit and --api-rate-burst: far above what an agent's tool calls need
// (one call per model turn, seconds apart), well below what one agent in a loop can send.
const (
	DefaultRateLimit = 20
	DefaultRateBurst = 40
)

const (
	// limiterSweepAbove is the number of limiters past which idle ones are dropped.
	limiterSweepAbove = 4096
	// limiterSweepInterval is the least time between two sweeps, so a stream of new Tasks past
	// limiterSweepAbove does not scan the map on every request.
	limiterSweepInterval = time.Second
)

// RateLimit bounds the REST requests of each Task: PerSecond on average, Burst at once. Zero in
// either field turns the limit off (the zero value is off).
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// Enabled is true when both fields are positive.
func (r RateLimit) Enabled() bool { return r.PerSecond > 0 && r.Burst > 0 }

// Validate names a setting that cannot be meant: negative or not a number.
func (r RateLimit) Validate() error {
	if r.PerSecond < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) {
		return fmt.Errorf("API rate limit of %v requests/s per Task is invalid: want a finite number >= 0 (0 turns the limit off)", r.PerSecond)
	}
	if r.Burst < 0 {
		return fmt.Errorf("API rate burst of %d requests per Task is invalid: want an integer >= 0 (0 turns the limit off)", r.Burst)
	}
	return nil
}

// String is how the limit is named in a 429's message.
func (r RateLimit) String() string {
	return fmt.Sprintf("rate limit of %s requests/s (burst %d) per Task", strconv.FormatFloat(r.PerSecond, 'g', -1, 64), r.Burst)
}

// taskLimiters holds one token bucket per Task.
//
// The map stays bounded: its keys are the UIDs of authenticated Tasks only (an unknown or ended
// token is refused before it reaches a limiter), and once it holds limiterSweepAbove limiters, a
// new Task's first request drops every idle one, at most once per limiterSweepInterval. A limiter
// is idle when its bucket is full again (a Task that sent nothing for Burst/PerSecond, 2 s by
// default); a new limiter starts full, so dropping an idle one changes no answer, and a Task that
// is being limited always keeps its limiter. The map is thus at most limiterSweepAbove limiters
// plus those of Tasks that sent a request within the last Burst/PerSecond and a second.
type taskLimiters struct {
	limit RateLimit
	now   func() time.Time

	mu        sync.Mutex
	byTask    map[types.UID]*rate.Limiter
	lastSweep time.Time
}

func newTaskLimiters(limit RateLimit, now func() time.Time) *taskLimiters {
	return &taskLimiters{limit: limit, now: now, byTask: map[types.UID]*rate.Limiter{}}
}

// allow takes one token from uid's bucket. Without one it answers false and how long until the
// bucket holds one again.
func (l *taskLimiters) allow(uid types.UID) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.byTask[uid]
	if !ok {
		l.sweep(now)
		lim = rate.NewLimiter(rate.Limit(l.limit.PerSecond), l.limit.Burst)
		l.byTask[uid] = lim
	}
	if lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - lim.TokensAt(now)
	return false, time.Duration(math.Ceil(missing / l.limit.PerSecond * float64(time.Second)))
}

// sweep drops idle limiters once there are limiterSweepAbove of them, at most once per
// limiterSweepInterval. l.mu is held.
func (l *taskLimiters) sweep(now time.Time) {
	if len(l.byTask) < limiterSweepAbove || now.Sub(l.lastSweep) < limiterSweepInterval {
		return
	}
	l.lastSweep = now
	full := float64(l.limit.Burst)
	for uid, lim := range l.byTask {
		if lim.TokensAt(now) >= full {
			delete(l.byTask, uid)
		}
	}
}

// len is the number of limiters held.
func (l *taskLimiters) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byTask)
}

// retryAfter is the Retry-After header's value for a wait: whole seconds, rounded up, at least 1
// (the header has no finer unit, and 0 would invite an immediate retry).
func retryAfter(wait time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(wait.Seconds()))), 10)
}

// rateLimited is the 429 of a Task over its limit, with Retry-After set on w; nil when the
// request may go on (or there is no limit).
func (s *Server) rateLimited(w http.ResponseWriter, uid types.UID) *apiError {
	if s.limiters == nil {
		return nil
	}
	ok, wait := s.limiters.allow(uid)
	if ok {
		return nil
	}
	after := retryAfter(wait)
	w.Header().Set("Retry-After", after)
	return errorf(http.StatusTooManyRequests, "%s exceeded: retry after %ss", s.opts.RateLimit, after)
}
