package rest

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
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

// limiters holds one token bucket per key: a Task's UID after authentication (taskLimiters), a
// source address before it (sourceLimiters).
//
// The map stays bounded: its keys are the UIDs of authenticated Tasks only (an unknown or ended
// token is refused before it reaches a limiter), and once it holds limiterSweepAbove limiters, a
// new Task's first request drops every idle one, at most once per limiterSweepInterval. A limiter
// is idle when its bucket is full again (a Task that sent nothing for Burst/PerSecond, 2 s by
// default); a new limiter starts full, so dropping an idle one changes no answer, and a Task that
// is being limited always keeps its limiter. The map is thus at most limiterSweepAbove limiters
// plus those of Tasks that sent a request within the last Burst/PerSecond and a second.
type limiters[K comparable] struct {
	limit RateLimit
	now   func() time.Time

	mu        sync.Mutex
	byKey     map[K]*rate.Limiter
	lastSweep time.Time
}

// taskLimiters limit each authenticated Task; sourceLimiters each source address, before
// authentication. Source addresses are pod and node IPs, as bounded as Tasks are.
type (
	taskLimiters   = limiters[types.UID]
	sourceLimiters = limiters[netip.Addr]
)

func newLimiters[K comparable](limit RateLimit, now func() time.Time) *limiters[K] {
	return &limiters[K]{limit: limit, now: now, byKey: map[K]*rate.Limiter{}}
}

func newTaskLimiters(limit RateLimit, now func() time.Time) *taskLimiters {
	return newLimiters[types.UID](limit, now)
}

// allow takes one token from key's bucket. Without one it answers false and how long until the
// bucket holds one again.
func (l *limiters[K]) allow(key K) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limiterFor(key, now)
	if lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - lim.TokensAt(now)
	return false, time.Duration(math.Ceil(missing / l.limit.PerSecond * float64(time.Second)))
}

// reserve takes one token from key's bucket, as allow does, and returns refund, which gives it
// back: for a budget that only failures spend, taken before the attempt (so concurrent attempts
// cannot all pass on one token) and refunded when the attempt succeeds.
func (l *limiters[K]) reserve(key K) (refund func(), ok bool, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.limiterFor(key, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); !r.OK() || d > 0 {
		r.CancelAt(now)
		return nil, false, d
	}
	return func() { r.CancelAt(l.now()) }, true, 0
}

// limiterFor is key's limiter, made (full) if key has none. l.mu is held.
func (l *limiters[K]) limiterFor(key K, now time.Time) *rate.Limiter {
	lim, ok := l.byKey[key]
	if !ok {
		l.sweep(now)
		lim = rate.NewLimiter(rate.Limit(l.limit.PerSecond), l.limit.Burst)
		l.byKey[key] = lim
	}
	return lim
}

// sweep drops idle limiters once there are limiterSweepAbove of them, at most once per
// limiterSweepInterval. l.mu is held.
func (l *limiters[K]) sweep(now time.Time) {
	if len(l.byKey) < limiterSweepAbove || now.Sub(l.lastSweep) < limiterSweepInterval {
		return
	}
	l.lastSweep = now
	full := float64(l.limit.Burst)
	for key, lim := range l.byKey {
		if lim.TokensAt(now) >= full {
			delete(l.byKey, key)
		}
	}
}

// len is the number of limiters held.
func (l *limiters[K]) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
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

// Defaults of the limit per source address, applied before authentication: every request costs
// one token, whatever it is (a bad token, a token review, an unknown path), so a pod cannot make
// the operator authenticate, log or look up without bound. Above the per-Task limit, since a
// node's address may carry several pods' calls.
const (
	DefaultSourceRateLimit = 50
	DefaultSourceRateBurst = 100
)

// sourceToolLabel is the tool label of a request refused by the source limit: no route was
// matched yet.
const sourceToolLabel = "source_limited"

// sourceLimited answers 429, with Retry-After, to a source address over its limit, before
// anything else is done for the request; other requests go on to next.
func (s *Server) sourceLimited(next http.Handler) http.Handler {
	if s.sources == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := sourceAddr(r)
		ok, wait := s.sources.allow(src)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		after := retryAfter(wait)
		w.Header().Set("Retry-After", after)
		writeJSON(w, http.StatusTooManyRequests, errorBody{Error: fmt.Sprintf("rate limit of %s requests/s (burst %d) per source address exceeded: retry after %ss",
			strconv.FormatFloat(s.opts.SourceRateLimit.PerSecond, 'g', -1, 64), s.opts.SourceRateLimit.Burst, after)})
		s.count(sourceToolLabel, http.StatusTooManyRequests)
	})
}

// sourceAddr is the request's remote address without its port; an address that does not parse
// shares the zero Addr's bucket.
func sourceAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
