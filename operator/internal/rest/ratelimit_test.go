package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/token"
)

// fakeClock is a settable clock for the limiters.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestTaskLimiters: each Task has its own token bucket: Burst requests at once, then one per
// 1/PerSecond, and a refused request is told how long until its next token.
func TestTaskLimiters(t *testing.T) {
	type step struct {
		after   time.Duration // advance the clock by this much first
		task    types.UID
		n       int // send this many requests (1 when 0)
		allowed bool
		wait    time.Duration // the wait a refused request is told
	}
	def := RateLimit{PerSecond: DefaultRateLimit, Burst: DefaultRateBurst}
	cases := []struct {
		name  string
		limit RateLimit
		steps []step
	}{
		{"the burst passes, the next is refused", def, []step{
			{task: "a", n: 40, allowed: true},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
		}},
		{"tokens come back at the rate", def, []step{
			{task: "a", n: 40, allowed: true},
			{after: 20 * time.Millisecond, task: "a", allowed: false, wait: 30 * time.Millisecond},
			{after: 30 * time.Millisecond, task: "a", allowed: true},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
			{after: time.Second, task: "a", n: 20, allowed: true},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
		}},
		{"Tasks do not share a bucket", def, []step{
			{task: "a", n: 40, allowed: true},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
			{task: "b", n: 40, allowed: true},
			{task: "b", allowed: false, wait: 50 * time.Millisecond},
		}},
		{"a long pause refills to the burst, no more", def, []step{
			{task: "a", n: 40, allowed: true},
			{after: time.Hour, task: "a", n: 40, allowed: true},
			{task: "a", allowed: false, wait: 50 * time.Millisecond},
		}},
		{"a steady rate under the limit is never refused", def, []step{
			{task: "a", n: 40, allowed: true},
			{after: 50 * time.Millisecond, task: "a", allowed: true},
			{after: 50 * time.Millisecond, task: "a", allowed: true},
			{after: 50 * time.Millisecond, task: "a", allowed: true},
		}},
		{"slow rate, burst of one", RateLimit{PerSecond: 0.5, Burst: 1}, []step{
			{task: "a", allowed: true},
			{task: "a", allowed: false, wait: 2 * time.Second},
			{after: 1500 * time.Millisecond, task: "a", allowed: false, wait: 500 * time.Millisecond},
			{after: 500 * time.Millisecond, task: "a", allowed: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l := newTaskLimiters(tc.limit, clock.now)
			for i, st := range tc.steps {
				clock.advance(st.after)
				for j := range max(st.n, 1) {
					ok, wait := l.allow(st.task)
					if ok != st.allowed {
						t.Fatalf("step %d, request %d of task %s: allowed %v, want %v", i, j+1, st.task, ok, st.allowed)
					}
					if diff := wait - st.wait; diff < -time.Microsecond || diff > time.Microsecond {
						t.Fatalf("step %d, request %d of task %s: wait %s, want %s", i, j+1, st.task, wait, st.wait)
					}
				}
			}
		})
	}
}

// TestRetryAfter: the header carries whole seconds, rounded up, never 0.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{
		{0, "1"}, {time.Nanosecond, "1"}, {50 * time.Millisecond, "1"}, {time.Second, "1"},
		{time.Second + time.Nanosecond, "2"}, {2500 * time.Millisecond, "3"},
	} {
		if got := retryAfter(tc.wait); got != tc.want {
			t.Errorf("retryAfter(%s) = %q, want %q", tc.wait, got, tc.want)
		}
	}
}

// TestRateLimitValidate: off, on, and the settings that cannot be meant.
func TestRateLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		limit   RateLimit
		enabled bool
		err     string
	}{
		{RateLimit{}, false, ""},
		{RateLimit{PerSecond: 20, Burst: 40}, true, ""},
		{RateLimit{PerSecond: 0.5, Burst: 1}, true, ""},
		{RateLimit{PerSecond: 20}, false, ""},
		{RateLimit{Burst: 40}, false, ""},
		{RateLimit{PerSecond: -1, Burst: 40}, false, "rate limit of -1 requests/s"},
		{RateLimit{PerSecond: 20, Burst: -1}, false, "burst of -1 requests"},
	} {
		err := tc.limit.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v: %v", tc.limit, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: error %v, want one containing %q", tc.limit, err, tc.err)
		}
		if got := tc.limit.Enabled(); got != tc.enabled {
			t.Errorf("%+v: Enabled() = %v, want %v", tc.limit, got, tc.enabled)
		}
	}
}

// TestTaskLimitersAreBounded: past limiterSweepAbove limiters, a new Task's first request drops the
// idle ones (full buckets), at most once a second, and never the limiter of a Task being limited.
func TestTaskLimitersAreBounded(t *testing.T) {
	clock := newFakeClock()
	l := newTaskLimiters(RateLimit{PerSecond: DefaultRateLimit, Burst: DefaultRateBurst}, clock.now)
	// One Task in a loop, limited from the start and kept limited below.
	for range DefaultRateBurst {
		l.allow("hammer")
	}
	if ok, _ := l.allow("hammer"); ok {
		t.Fatal("hammer: allowed past its burst")
	}
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("task-%05d", i)) }
	// 3 × limiterSweepAbove Tasks, one request each, within the same second: their buckets are not
	// full yet, so nothing may be dropped, and the sweep must not run more than once.
	for i := range 3 * limiterSweepAbove {
		l.allow(uid(i))
	}
	if got, want := l.len(), 3*limiterSweepAbove+1; got != want {
		t.Fatalf("%d limiters after %d busy Tasks, want %d: a Task with tokens spent was dropped", got, 3*limiterSweepAbove, want)
	}
	// 2 s later every bucket but the hammer's is full: the next new Task sweeps them.
	for range 40 {
		clock.advance(50 * time.Millisecond)
		if ok, _ := l.allow("hammer"); !ok {
			t.Fatal("hammer: refused at exactly the rate")
		}
		l.allow("hammer") // and one more, refused, so it stays empty
	}
	l.allow("newcomer")
	if got := l.len(); got != 2 {
		t.Fatalf("%d limiters after the sweep, want 2 (the hammer's and the newcomer's)", got)
	}
	if ok, _ := l.allow("hammer"); ok {
		t.Fatal("hammer: allowed right after the sweep; its limiter was dropped and refilled")
	}
	// Grow past the threshold again within the same second: no second sweep yet...
	for i := range limiterSweepAbove + 10 {
		l.allow(uid(i))
	}
	clock.advance(3 * time.Second)
	l.allow("late")
	// ...but the first new Task a second later drops everything idle.
	if got := l.len(); got != 1 {
		t.Fatalf("%d limiters after the second sweep, want 1 (the late Task's; the hammer's, idle for 3 s, is gone too)", got)
	}
	// Under the threshold nothing is swept, however idle.
	clock.advance(time.Hour)
	l.allow("one more")
	if got := l.len(); got != 2 {
		t.Fatalf("%d limiters, want 2: under %d nothing is swept", got, limiterSweepAbove)
	}
}

// TestRateLimitOverHTTP: over real HTTP, the 41st request of a burst gets 429 with Retry-After
// and a message naming the limit, after authentication (a bad token is still a 401) and before
// the handler; another Task's requests are unaffected. The clock is frozen, so no token comes
// back during the burst.
func TestRateLimitOverHTTP(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, tatarav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	objs := []client.Object{}
	toks := map[string]string{}
	for _, name := range []string{"busy", "calm"} {
		tok, err := token.New()
		if err != nil {
			t.Fatal(err)
		}
		task := &tatarav1.Task{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"}},
			Status:     tatarav1.TaskStatus{Phase: tatarav1.PhaseRunning, TokenHash: token.Hash(tok)},
		}
		toks[name] = tok
		objs = append(objs, task, agent.BuildSecret(task, tok))
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	if err := index.Register(context.Background(), fieldIndexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	s := New(Options{Client: c, APIReader: c, RateLimit: RateLimit{PerSecond: DefaultRateLimit, Burst: DefaultRateBurst}})
	clock := newFakeClock()
	s.limiters.now = clock.now
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	get := func(task, tok string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/tasks/"+task, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(body)
	}
	for i := range DefaultRateBurst {
		if code, _, body := get("busy", toks["busy"]); code != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s, want 200", i+1, code, body)
		}
	}
	code, h, body := get("busy", toks["busy"])
	if code != http.StatusTooManyRequests {
		t.Fatalf("request %d: %d %s, want 429", DefaultRateBurst+1, code, body)
	}
	if ra := h.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want \"1\"", ra)
	}
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("429 body %q: %v", body, err)
	}
	if want := "rate limit of 20 requests/s (burst 40) per Task exceeded"; !strings.Contains(e.Error, want) {
		t.Errorf("429 error %q, want it to contain %q", e.Error, want)
	}
	// The limit is per Task and comes after authentication: neither a bad token nor a request for
	// another Task's path is counted against or answered by it.
	if code, _, body := get("busy", strings.Repeat("0", 64)); code != http.StatusUnauthorized {
		t.Errorf("malformed token while busy is limited: %d %s, want 401", code, body)
	}
	for i := range DefaultRateBurst {
		if code, _, body := get("calm", toks["calm"]); code != http.StatusOK {
			t.Fatalf("calm Task, request %d while busy is limited: %d %s, want 200", i+1, code, body)
		}
	}
	// Time brings tokens back at the rate: one after 50 ms.
	clock.advance(50 * time.Millisecond)
	if code, _, body := get("busy", toks["busy"]); code != http.StatusOK {
		t.Fatalf("busy, 50 ms later: %d %s, want 200", code, body)
	}
	if code, _, _ := get("busy", toks["busy"]); code != http.StatusTooManyRequests {
		t.Fatalf("busy, second request 50 ms later: %d, want 429", code)
	}
}

// TestNoRateLimitByDefault: Options without a RateLimit limit nothing.
func TestNoRateLimitByDefault(t *testing.T) {
	if s := New(Options{}); s.limiters != nil {
		t.Fatal("a server without Options.RateLimit has limiters")
	}
}
