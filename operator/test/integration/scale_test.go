//go:build scale

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/manager"
)

// The scale benchmark: bursts of N Tasks over 10 Projects against one in-process operator per
// N, on the real API server. It only prints figures (make bench-scale); it asserts nothing
// about time, since the machine decides those.

const (
	scaleProjects = 10
	// scaleCreators is how many clients create the burst concurrently.
	scaleCreators = 8
	// scaleQuiet is how long the operator must send no request for the run to count as settled.
	scaleQuiet = 2 * time.Second
)

// scaleSizes are the burst sizes; TATARA_SCALE_SIZES (e.g. "10,100") overrides them for a quick
// look, and the growth ratio needs 100 and 1000. TATARA_SCALE_CPUPROFILE=<file> profiles the
// largest burst; it is off by default because profiling slows the run it measures.
func scaleSizes(t *testing.T) []int {
	env := os.Getenv("TATARA_SCALE_SIZES")
	if env == "" {
		return []int{10, 100, 1000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("TATARA_SCALE_SIZES: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// scaleWorkers is the operator's number of reconcile workers in the run: the default of cmd (8)
// unless TATARA_SCALE_WORKERS says otherwise, to compare defaults on the same machine.
func scaleWorkers(t *testing.T) int {
	env := os.Getenv("TATARA_SCALE_WORKERS")
	if env == "" {
		return 8
	}
	n, err := strconv.Atoi(env)
	if err != nil || n <= 0 {
		t.Fatalf("TATARA_SCALE_WORKERS: %q is not a positive number", env)
	}
	return n
}

type scaleResult struct {
	n          int
	allPods    time.Duration
	p50        time.Duration
	p95        time.Duration
	p99        time.Duration
	requests   map[string]int64 // verb resource -> count, from the first create until settled
	heapPeak   uint64           // HeapInuse peak minus the baseline before the operator started
	goroutines int              // goroutine peak minus the baseline
}

func (r scaleResult) totalRequests() int64 {
	var n int64
	for _, c := range r.requests {
		n += c
	}
	return n
}

// TestScale runs the burst for each N and prints one table.
func TestScale(t *testing.T) {
	sizes := scaleSizes(t)
	var results []scaleResult
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			profile := ""
			if n == sizes[len(sizes)-1] {
				profile = os.Getenv("TATARA_SCALE_CPUPROFILE")
			}
			results = append(results, runScale(t, n, profile))
		})
	}
	if len(results) == len(sizes) {
		printScale(os.Stdout, results)
	}
}

// requestCounter counts the operator's API requests by verb and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int64
	last   atomic.Int64 // unix nanoseconds of the latest request
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		key := verbResource(req)
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
		c.last.Store(time.Now().UnixNano())
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// sampler records the peak heap in use and goroutine count every 100 ms.
type sampler struct {
	heap       uint64
	goroutines int
	stop       chan struct{}
	done       chan struct{}
}

func startSampler() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			s.heap = max(s.heap, ms.HeapInuse)
			s.goroutines = max(s.goroutines, runtime.NumGoroutine())
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() (heap uint64, goroutines int) {
	close(s.stop)
	<-s.done
	return s.heap, s.goroutines
}

// startCountedOperator is startOperator on a copy of the config whose transport counts
// requests. QPS -1 is what ctrl.GetConfig gives the real operator (no client-side limit; the
// API server's priority and fairness decides), where envtest's config would allow 1000.
func startCountedOperator(t *testing.T, counter *requestCounter) (stop func()) {
	t.Helper()
	opCfg := rest.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = -1, 0
	opCfg.WrapTransport = counter.wrap
	workers := scaleWorkers(t)
	fmt.Printf("operator: %d reconcile workers, no client-side rate limit\n", workers)
	return startOperatorOn(t, opCfg, func(o *manager.Options) { o.MaxConcurrentReconciles = workers }).stop
}

// waitQuiet returns once the operator has sent no request for quiet, or after limit.
func waitQuiet(c *requestCounter, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Since(time.Unix(0, c.last.Load())) < quiet && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// runScale runs one burst of n Tasks; a non-empty profile is where the CPU profile of the
// test process (operator and test clients) goes.
func runScale(t *testing.T, n int, profile string) scaleResult {
	ctx := context.Background()
	namespaces := make([]string, scaleProjects)
	for i := range namespaces {
		namespaces[i] = newNamespace(t)
		newProject(t, namespaces[i], "p")
	}
	t.Cleanup(func() { deleteBenchNamespaces(t, namespaces) })

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, ns := range namespaces {
		ours[ns] = true
	}
	// One watch over every namespace: the time a pod is first seen is its observed creation
	// (creationTimestamp has whole seconds only).
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: agent.LabelManagedBy + "=" + agent.ManagedByValue})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := make(map[string]time.Time, n)
	allSeen := make(chan struct{})
	var seenMu sync.Mutex
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !ours[p.Namespace] {
				continue
			}
			seenMu.Lock()
			key := p.Namespace + "/" + p.Name
			if _, dup := seen[key]; !dup {
				seen[key] = now
				if len(seen) == n {
					close(allSeen)
				}
			}
			seenMu.Unlock()
		}
	}()

	// The baseline is taken after a GC with the test's own watch and clients in place, so the
	// deltas are the operator's (plus the burst's few creating goroutines).
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	baseGoroutines := runtime.NumGoroutine()
	samples := startSampler()
	counter := &requestCounter{counts: map[string]int64{}}
	stopOperator := startCountedOperator(t, counter)
	stopped := false
	defer func() {
		if !stopped {
			stopOperator()
		}
	}()

	if profile != "" {
		path := profile
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				t.Errorf("failed to write %s: %v", path, err)
			}
			fmt.Printf("CPU profile of the N=%d run (test process: operator and test clients): %s\n", n, path)
		}()
	}

	// The informers' watches open just after the cache syncs: let that settle, so the burst's
	// count holds only what the Tasks cost.
	waitQuiet(counter, time.Second, 30*time.Second)
	atStart := counter.snapshot()
	created := make([]time.Time, n)
	names := make([]string, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	begin := time.Now()
	for range scaleCreators {
		// Each creator has its own client, as separate users or controllers would.
		c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				ns := namespaces[i%scaleProjects]
				task := &tatarav1.Task{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%04d", i), Namespace: ns},
					Spec: tatarav1.TaskSpec{
						Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"},
						Repo: "operator", Directive: "do the scale work",
					},
				}
				if err := c.Create(ctx, task); err != nil {
					failed.Store(err)
					continue
				}
				// The Task exists once the create returns: from then on the wait is the operator's.
				created[i] = time.Now()
				names[i] = ns + "/" + agent.PodName(task.Name)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatalf("failed to create a task: %v", err)
	}

	timeout := time.Duration(n)*100*time.Millisecond + 2*time.Minute
	select {
	case <-allSeen:
	case <-time.After(timeout):
		seenMu.Lock()
		got := len(seen)
		seenMu.Unlock()
		t.Fatalf("only %d of %d agent pods were created within %s", got, n, timeout)
	}
	seenMu.Lock()
	latencies := make([]time.Duration, 0, n)
	var last time.Time
	for i, name := range names {
		at := seen[name]
		if at.After(last) {
			last = at
		}
		latencies = append(latencies, max(0, at.Sub(created[i])))
	}
	seenMu.Unlock()

	// The operator keeps writing after the pods exist (status, events): count until it settles.
	waitQuiet(counter, scaleQuiet, 2*time.Minute)
	end := counter.snapshot()
	heap, goroutines := samples.finish()
	stopOperator()
	stopped = true

	requests := map[string]int64{}
	for k, v := range end {
		if d := v - atStart[k]; d > 0 {
			requests[k] = d
		}
	}
	slices.Sort(latencies)
	return scaleResult{
		n: n, allPods: last.Sub(begin),
		p50: percentile(latencies, 0.50), p95: percentile(latencies, 0.95), p99: percentile(latencies, 0.99),
		requests: requests,
		heapPeak: heap - min(heap, base.HeapInuse), goroutines: max(0, goroutines-baseGoroutines),
	}
}

func printScale(out *os.File, rs []scaleResult) {
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	type row struct {
		name  string
		per   bool // a per-Task figure, which should not grow with N
		value func(scaleResult) float64
		unit  string
	}
	rows := []row{
		{"time until every pod exists", false, func(r scaleResult) float64 { return ms(r.allPods) }, "ms"},
		{"  per Task", true, func(r scaleResult) float64 { return ms(r.allPods) / float64(r.n) }, "ms"},
		{"task->pod p50", false, func(r scaleResult) float64 { return ms(r.p50) }, "ms"},
		{"task->pod p95", false, func(r scaleResult) float64 { return ms(r.p95) }, "ms"},
		{"task->pod p99", false, func(r scaleResult) float64 { return ms(r.p99) }, "ms"},
		{"operator requests per Task", true, func(r scaleResult) float64 { return float64(r.totalRequests()) / float64(r.n) }, ""},
		{"peak heap in use (delta)", false, func(r scaleResult) float64 { return mb(r.heapPeak) }, "MiB"},
		{"  per Task", true, func(r scaleResult) float64 { return mb(r.heapPeak) / float64(r.n) * 1024 }, "KiB"},
		{"peak goroutines (delta)", false, func(r scaleResult) float64 { return float64(r.goroutines) }, ""},
	}
	_, _ = fmt.Fprintf(out, "\nscale: N Tasks created at once by %d clients over %d Projects, one in-process operator per N\n", scaleCreators, scaleProjects)
	_, _ = fmt.Fprintf(out, "(real kube-apiserver + etcd via envtest; heap and goroutines are deltas over a baseline taken\n")
	_, _ = fmt.Fprintf(out, " before the operator started, in the test process, so they include the test's watch and clients)\n\n")
	_, _ = fmt.Fprintf(out, "%-30s", "")
	for _, r := range rs {
		_, _ = fmt.Fprintf(out, " %12s", fmt.Sprintf("N=%d", r.n))
	}
	_, _ = fmt.Fprintf(out, " %10s\n", "1000/100")
	var grows []string
	for _, rw := range rows {
		label := rw.name
		if rw.unit != "" {
			label += " (" + rw.unit + ")"
		}
		_, _ = fmt.Fprintf(out, "%-30s", label)
		byN := map[int]float64{}
		for _, r := range rs {
			v := rw.value(r)
			byN[r.n] = v
			_, _ = fmt.Fprintf(out, " %12.2f", v)
		}
		small, big := byN[100], byN[1000]
		if small <= 0 || big <= 0 {
			_, _ = fmt.Fprintf(out, " %10s\n", "-")
			continue
		}
		ratio := big / small
		_, _ = fmt.Fprintf(out, " %9.2fx\n", ratio)
		// Within half again of the N=100 figure counts as flat: one run on a shared machine
		// wobbles that much.
		if rw.per && ratio > 1.5 {
			grows = append(grows, fmt.Sprintf("%s %s (%.2fx)", strings.TrimSpace(rw.name), rw.unit, ratio))
		}
	}
	switch {
	case !slices.ContainsFunc(rs, func(r scaleResult) bool { return r.n == 100 }) ||
		!slices.ContainsFunc(rs, func(r scaleResult) bool { return r.n == 1000 }):
		_, _ = fmt.Fprintf(out, "\nno growth verdict: it compares N=1000 with N=100\n")
	case len(grows) == 0:
		_, _ = fmt.Fprintf(out, "\nper-Task cost does not grow with N (every per-Task figure at N=1000 is within 1.5x of N=100)\n")
	default:
		_, _ = fmt.Fprintf(out, "\nper-Task cost GROWS with N: %s\n", strings.Join(grows, ", "))
	}
	_, _ = fmt.Fprintf(out, "\noperator requests per Task by verb and resource:\n")
	keys := map[string]bool{}
	for _, r := range rs {
		for k := range r.requests {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		_, _ = fmt.Fprintf(out, "  %-28s", k)
		for _, r := range rs {
			_, _ = fmt.Fprintf(out, " %12.2f", float64(r.requests[k])/float64(r.n))
		}
		_, _ = fmt.Fprintln(out)
	}
}
