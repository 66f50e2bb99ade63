//go:build restload

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/rest"
	tokenpkg "tatara.dev/operator/internal/token"
)

// The REST load benchmark (make bench-rest): N agents, each with its own Task and the token the
// operator minted for it, loop task_get and task_note over real HTTP against one in-process
// operator on the real API server, next to a baseline of the same N goroutines reading their
// Task from the same operator's cache with client.Get. It prints figures and fails only on
// errors other than 429; it asserts nothing about time, since the machine decides those.

const restLoadProjects = 10

// restLoadConfig is the run's size; TATARA_RESTLOAD_AGENTS, TATARA_RESTLOAD_DURATION and
// TATARA_RESTLOAD_BASELINE override it (e.g. 50 agents for 10s for a quick look).
type restLoadConfig struct {
	agents   int
	duration time.Duration // of the REST load
	baseline time.Duration // of the client.Get baseline
	// noteRate, when > 0 (TATARA_RESTLOAD_NOTE_RATE), replaces the closed loop by an open one:
	// task_note calls arrive at this many per second in all, round robin over the agents, each
	// sent on time whatever the earlier ones are waiting for.
	noteRate float64
}

func restLoadSettings(t *testing.T) restLoadConfig {
	c := restLoadConfig{agents: 500, duration: 30 * time.Second, baseline: 10 * time.Second}
	if v := os.Getenv("TATARA_RESTLOAD_AGENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("TATARA_RESTLOAD_AGENTS: %q is not a positive number", v)
		}
		c.agents = n
	}
	if v := os.Getenv("TATARA_RESTLOAD_NOTE_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("TATARA_RESTLOAD_NOTE_RATE: %q is not a positive number of notes per second", v)
		}
		c.noteRate = r
	}
	for name, d := range map[string]*time.Duration{"TATARA_RESTLOAD_DURATION": &c.duration, "TATARA_RESTLOAD_BASELINE": &c.baseline} {
		if v := os.Getenv(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p <= 0 {
				t.Fatalf("%s: %q is not a positive duration (e.g. 10s)", name, v)
			}
			*d = p
		}
	}
	return c
}

// restAgent is one agent: its Task and the token read from the Task's Secret.
type restAgent struct {
	ns, task, tok string
}

// sample is one answered request.
type sample struct {
	tool    string
	code    int
	latency time.Duration
}

// loadResult is what one phase (baseline or REST) measured.
type loadResult struct {
	elapsed    time.Duration
	latencies  map[string][]time.Duration // by tool ("" for the baseline), answered 2xx only
	ok         map[string]int
	limited    map[string]int // 429s
	unexpected []string       // every other answer or transport error, described
}

func newLoadResult() *loadResult {
	return &loadResult{latencies: map[string][]time.Duration{}, ok: map[string]int{}, limited: map[string]int{}}
}

func (r *loadResult) add(s sample) {
	switch {
	case s.code >= 200 && s.code < 300:
		r.ok[s.tool]++
		r.latencies[s.tool] = append(r.latencies[s.tool], s.latency)
	case s.code == http.StatusTooManyRequests:
		r.limited[s.tool]++
	}
}

func (r *loadResult) merge(o *loadResult) {
	for k, v := range o.latencies {
		r.latencies[k] = append(r.latencies[k], v...)
	}
	for k, v := range o.ok {
		r.ok[k] += v
	}
	for k, v := range o.limited {
		r.limited[k] += v
	}
	r.unexpected = append(r.unexpected, o.unexpected...)
}

func (r *loadResult) all() []time.Duration {
	var out []time.Duration
	for _, v := range r.latencies {
		out = append(out, v...)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestRESTLoad runs the baseline, then the REST load, and prints one table.
func TestRESTLoad(t *testing.T) {
	conf := restLoadSettings(t)
	// The operator as cmd runs it: the default per-Task rate limit, and no client-side limit
	// towards the API server (QPS -1, what ctrl.GetConfig gives; envtest's config would allow 1000).
	opCfg := restclient.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = -1, 0
	counter := &apiCounter{counts: map[string]int64{}}
	opCfg.WrapTransport = counter.wrap
	limit := rest.RateLimit{PerSecond: rest.DefaultRateLimit, Burst: rest.DefaultRateBurst}
	op := startOperatorOn(t, opCfg, func(o *manager.Options) { o.APIRateLimit = limit })

	setupStart := time.Now()
	agents := createRESTAgents(t, conf.agents)
	fmt.Printf("set up %d Tasks over %d Projects, each with its token Secret, in %s\n", len(agents), restLoadProjects, time.Since(setupStart).Round(time.Millisecond))

	// Let the reconciles of the setup finish, so the counts below are the load's.
	time.Sleep(2 * time.Second)
	before := counter.snapshot()
	base := runBaseline(t, op.GetClient(), agents, conf.baseline)
	afterBase := counter.snapshot()
	cpuBefore := processCPU(t)
	var load *loadResult
	if conf.noteRate > 0 {
		load = runOpenNotes(t, op.url, agents, conf.duration, conf.noteRate)
	} else {
		load = runRESTLoad(t, op.url, agents, conf.duration)
	}
	cpu := processCPU(t) - cpuBefore
	afterLoad := counter.snapshot()
	printRESTLoad(os.Stdout, conf, limit, base, load)
	fmt.Printf("CPU of this process (operator and the agents' HTTP clients) during the REST load: %.2f of %d cores on average\n",
		cpu.Seconds()/load.elapsed.Seconds(), runtime.NumCPU())
	printAPIRequests(os.Stdout, delta(before, afterBase), sum(base.ok), delta(afterBase, afterLoad), sum(load.ok))

	if n := len(load.unexpected); n > 0 {
		shown := load.unexpected[:min(n, 10)]
		t.Errorf("%d unexpected answers (anything but 2xx and 429), the first %d:\n  %s", n, len(shown), strings.Join(shown, "\n  "))
	}
	if len(load.all()) == 0 {
		t.Error("the REST load answered no request with 2xx")
	}
	checkNotesAccounted(t, agents, load)
}

// checkNotesAccounted fails the run unless every note answered 201 is in its Task, kept in
// status.notes or counted in status.notesDropped, and nothing more: sent = kept + dropped.
func checkNotesAccounted(t *testing.T, agents []restAgent, load *loadResult) {
	t.Helper()
	var kept, dropped int64
	for _, a := range agents {
		var task tatarav1.Task
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: a.ns, Name: a.task}, &task); err != nil {
			t.Fatal(err)
		}
		kept += int64(len(task.Status.Notes))
		dropped += task.Status.NotesDropped
	}
	answered := int64(load.ok["task_note"])
	fmt.Printf("notes: %d answered 201; the Tasks keep %d and count %d dropped\n", answered, kept, dropped)
	if len(load.unexpected) == 0 && kept+dropped != answered {
		t.Errorf("%d notes were answered 201, but the Tasks keep %d and count %d dropped", answered, kept, dropped)
	}
}

// runOpenNotes sends task_note calls at rate per second in all for d, round robin over the agents,
// each in its own goroutine at its arrival time (an open loop: a slow answer delays no later call).
func runOpenNotes(t *testing.T, base string, agents []restAgent, d time.Duration, rate float64) *loadResult {
	t.Helper()
	clients := make([]*http.Client, len(agents))
	for i := range clients {
		clients[i] = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	}
	out := newLoadResult()
	var mu sync.Mutex
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	for n := 0; ; n++ {
		at := begin.Add(time.Duration(n) * every)
		if at.After(begin.Add(d)) {
			break
		}
		time.Sleep(time.Until(at))
		a, hc := agents[n%len(agents)], clients[n%len(agents)]
		wg.Go(func() {
			s, _, err := restCall(hc, http.MethodPost, base+"/api/v1/tasks/"+a.task+"/notes", a.tok, fmt.Sprintf(`{"text":"note %d of %s"}`, n, a.task))
			s.tool = "task_note"
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.unexpected = append(out.unexpected, fmt.Sprintf("task_note %s/%s: %v", a.ns, a.task, err))
				return
			}
			out.add(s)
		})
	}
	wg.Wait()
	out.elapsed = time.Since(begin)
	for _, hc := range clients {
		hc.CloseIdleConnections()
	}
	return out
}

// createRESTAgents creates n Tasks over restLoadProjects Projects in fresh namespaces and waits
// until the operator has minted every token (the Secret exists and status.tokenHash records it),
// as the kubelet would wait for the Secret before starting the agent.
func createRESTAgents(t *testing.T, n int) []restAgent {
	t.Helper()
	ctx := context.Background()
	namespaces := make([]string, restLoadProjects)
	for i := range namespaces {
		namespaces[i] = newNamespace(t)
		newProject(t, namespaces[i], "p")
	}
	t.Cleanup(func() { deleteBenchNamespaces(t, namespaces) })

	agents := make([]restAgent, n)
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				a := restAgent{ns: namespaces[i%restLoadProjects], task: fmt.Sprintf("agent-%04d", i)}
				task := &tatarav1.Task{
					ObjectMeta: metav1.ObjectMeta{Name: a.task, Namespace: a.ns},
					Spec: tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"},
						Repo: "operator", Directive: "note what you do"},
				}
				if err := k8s.Create(ctx, task); err != nil {
					errs <- fmt.Errorf("failed to create task %s/%s: %w", a.ns, a.task, err)
					continue
				}
				agents[i] = a
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err, ok := <-errs; ok {
		t.Fatal(err)
	}

	// Tokens: list each namespace's Tasks and Secrets until every Task's status.tokenHash matches
	// its Secret's token.
	deadline := time.Now().Add(time.Duration(n)*100*time.Millisecond + 2*time.Minute)
	for {
		missing := 0
		var lastErr error
		for _, ns := range namespaces {
			var tasks tatarav1.TaskList
			var secrets corev1.SecretList
			if err := k8s.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if err := k8s.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			hashes := map[string]string{}
			for _, tk := range tasks.Items {
				hashes[tk.Name] = tk.Status.TokenHash
			}
			toks := map[string]string{}
			for _, s := range secrets.Items {
				toks[s.Name] = string(s.Data[agent.TokenKey])
			}
			for i := range agents {
				a := &agents[i]
				if a.ns != ns || a.tok != "" {
					continue
				}
				tok := toks[agent.SecretName(a.task)]
				if tok == "" || hashes[a.task] == "" || tokenpkg.Hash(tok) != hashes[a.task] {
					missing++
					lastErr = fmt.Errorf("task %s/%s has no recorded token yet", a.ns, a.task)
					continue
				}
				a.tok = tok
			}
		}
		if missing == 0 {
			return agents
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Tasks had no token after waiting until %s: %v", missing, n, deadline.Format(time.TimeOnly), lastErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runBaseline has one goroutine per agent loop client.Get of its Task from the operator's cache.
func runBaseline(t *testing.T, c client.Client, agents []restAgent, d time.Duration) *loadResult {
	t.Helper()
	results := make([]*loadResult, len(agents))
	start := make(chan struct{})
	var stop time.Time // set before start closes
	var wg sync.WaitGroup
	for i, a := range agents {
		r := newLoadResult()
		results[i] = r
		wg.Go(func() {
			key := types.NamespacedName{Namespace: a.ns, Name: a.task}
			<-start
			ctx := context.Background()
			for time.Now().Before(stop) {
				var task tatarav1.Task
				begin := time.Now()
				err := c.Get(ctx, key, &task)
				lat := time.Since(begin)
				if err != nil {
					r.unexpected = append(r.unexpected, fmt.Sprintf("client.Get %s: %v", key, err))
					continue
				}
				r.add(sample{code: http.StatusOK, latency: lat})
			}
		})
	}
	begin := time.Now()
	stop = begin.Add(d)
	close(start)
	wg.Wait()
	out := newLoadResult()
	out.elapsed = time.Since(begin)
	for _, r := range results {
		out.merge(r)
	}
	if len(out.unexpected) > 0 {
		t.Errorf("baseline: %d client.Get errors, the first: %s", len(out.unexpected), out.unexpected[0])
	}
	return out
}

// runRESTLoad has one goroutine per agent alternate task_get and task_note over HTTP for d. Each
// agent has its own HTTP client and keep-alive connection, as each agent pod's cli does, and honours
// Retry-After on a 429 (an agent in a loop that ignored it would only collect more 429s).
func runRESTLoad(t *testing.T, base string, agents []restAgent, d time.Duration) *loadResult {
	t.Helper()
	results := make([]*loadResult, len(agents))
	start := make(chan struct{})
	var stop time.Time // set before start closes
	var wg sync.WaitGroup
	for i, a := range agents {
		r := newLoadResult()
		results[i] = r
		hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
		wg.Go(func() {
			defer hc.CloseIdleConnections()
			<-start
			for n := 0; time.Now().Before(stop); n++ {
				tool, method, path, body := "task_get", http.MethodGet, "/api/v1/tasks/"+a.task, ""
				if n%2 == 1 {
					tool, method, path = "task_note", http.MethodPost, "/api/v1/tasks/"+a.task+"/notes"
					body = fmt.Sprintf(`{"text":"note %d of %s"}`, n, a.task)
				}
				s, wait, err := restCall(hc, method, base+path, a.tok, body)
				s.tool = tool
				switch {
				case err != nil:
					r.unexpected = append(r.unexpected, fmt.Sprintf("%s %s/%s: %v", tool, a.ns, a.task, err))
				case s.code == http.StatusTooManyRequests:
					r.add(s)
					time.Sleep(min(wait, time.Until(stop)))
				default:
					r.add(s)
				}
			}
		})
	}
	begin := time.Now()
	stop = begin.Add(d)
	close(start)
	wg.Wait()
	out := newLoadResult()
	out.elapsed = time.Since(begin)
	for _, r := range results {
		out.merge(r)
	}
	return out
}

// restCall sends one request and reads the whole answer; a non-2xx answer's error message is
// part of err only when it is not a 429.
func restCall(hc *http.Client, method, url, tok, body string) (sample, time.Duration, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return sample{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	begin := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return sample{}, 0, err
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	lat := time.Since(begin)
	if err != nil {
		return sample{}, 0, fmt.Errorf("reading the %d answer: %w", resp.StatusCode, err)
	}
	s := sample{code: resp.StatusCode, latency: lat}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if perr != nil || secs < 1 {
			return s, 0, fmt.Errorf("429 with Retry-After %q, want whole seconds >= 1: %s", resp.Header.Get("Retry-After"), strings.TrimSpace(string(raw)))
		}
		return s, time.Duration(secs) * time.Second, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return s, 0, fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return s, 0, nil
}

// processCPU is the user and system CPU time this process has used.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func delta(from, to map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range to {
		if d := v - from[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// printAPIRequests prints the operator's API server requests during each phase, per answered call.
func printAPIRequests(out io.Writer, base map[string]int64, baseCalls int, load map[string]int64, loadCalls int) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format, args...) }
	keys := map[string]bool{}
	for k := range base {
		keys[k] = true
	}
	for k := range load {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	per := func(n int64, calls int) float64 {
		if calls == 0 {
			return 0
		}
		return float64(n) / float64(calls)
	}
	p("\noperator requests to the API server (REST API and controller together):\n")
	p("  %-34s %10s %12s %14s\n", "", "baseline", "REST load", "per REST call")
	var total int64
	for _, k := range sorted {
		total += load[k]
		p("  %-34s %10d %12d %14.3f\n", k, base[k], load[k], per(load[k], loadCalls))
	}
	p("  %-34s %10s %12d %14.3f\n", "all", "", total, per(total, loadCalls))
}

func printRESTLoad(out io.Writer, conf restLoadConfig, limit rest.RateLimit, base, load *loadResult) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format, args...) }
	perSec := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
	// Milliseconds to the nanosecond: a cache read takes well under a microsecond.
	pct := func(d []time.Duration, q float64) float64 {
		if len(d) == 0 {
			return 0
		}
		return float64(percentile(d, q).Nanoseconds()) / 1e6
	}
	type row struct {
		name     string
		answered int
		rate     float64
		p50, p99 float64
		limited  int
	}
	baseAll, restAll := base.all(), load.all()
	rows := []row{
		{"baseline client.Get (cache)", sum(base.ok), perSec(sum(base.ok), base.elapsed), pct(baseAll, 0.50), pct(baseAll, 0.99), 0},
		{"REST, both tools", sum(load.ok), perSec(sum(load.ok), load.elapsed), pct(restAll, 0.50), pct(restAll, 0.99), sum(load.limited)},
	}
	tools := make([]string, 0, len(load.latencies))
	for tool := range load.ok {
		tools = append(tools, tool)
	}
	slices.Sort(tools)
	for _, tool := range tools {
		l := load.latencies[tool]
		rows = append(rows, row{"  " + tool, load.ok[tool], perSec(load.ok[tool], load.elapsed), pct(l, 0.50), pct(l, 0.99), load.limited[tool]})
	}

	if conf.noteRate > 0 {
		p("\nREST under an open loop of task_note: %.0f calls/s in all, round robin over %d agents (each\n", conf.noteRate, conf.agents)
		p("with its own Task and token), each call sent at its time, for %s; baseline: the same %d\n", load.elapsed.Round(time.Millisecond), conf.agents)
	} else {
		p("\nREST under agent load: %d agents, each with its own Task and token, alternate task_get and\n", conf.agents)
		p("task_note over HTTP for %s (keep-alive, one connection per agent); baseline: the same %d\n", load.elapsed.Round(time.Millisecond), conf.agents)
	}
	p("goroutines loop client.Get of their Task from the operator's cache for %s, first, in the same\n", base.elapsed.Round(time.Millisecond))
	p("process. Real kube-apiserver + etcd via envtest, one in-process operator with the %s.\n", limit)
	p("Latencies of 2xx answers; the load generator shares the machine with the operator and the API server.\n\n")
	p("%-30s %10s %12s %10s %10s %8s\n", "", "answered", "answered/s", "p50 (ms)", "p99 (ms)", "429s")
	for _, r := range rows {
		p("%-30s %10d %12.1f %10.4g %10.4g %8d\n", r.name, r.answered, r.rate, r.p50, r.p99, r.limited)
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.4gx", a/b)
	}
	// Each REST row over the baseline: throughput (below 1: fewer answers per second) and latency.
	for _, r := range rows[1:] {
		name := "REST / baseline"
		if t := strings.TrimSpace(r.name); strings.HasPrefix(r.name, "  ") {
			name = "  " + t + " / baseline"
		}
		p("%-30s %10s %12s %10s %10s\n", name, "", ratio(r.rate, rows[0].rate), ratio(r.p50, rows[0].p50), ratio(r.p99, rows[0].p99))
	}
	p("\nerrors: %d unexpected (anything but 2xx and 429), %d 429s (rate limit)\n", len(load.unexpected), sum(load.limited))
}
