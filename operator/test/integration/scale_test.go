//go:build scale

package integration

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
// N, on the real API server, with the real kube-scheduler and kwok's fake nodes (kwok_test.go):
// every agent pod is scheduled, runs and ends, and its Task with it. It only prints figures (make
// bench-scale); it asserts nothing about time, since the machine decides those.

const (
	scaleProjects = 10
	// scaleCreators is how many clients create the burst concurrently.
	scaleCreators = 8
	// scaleQuiet is how long the operator must send no request for the run to count as settled.
	scaleQuiet = 2 * time.Second
)

// scaleSizes are the burst sizes; TATARA_SCALE_SIZES (e.g. "100,1000") overrides them for a
// quick look. The last column compares the last size with the first.
// TATARA_SCALE_CPUPROFILE=<file> profiles the largest burst; it is off by default because
// profiling slows the run it measures. TATARA_SCALE_HEAPPROFILE=<file> writes the heap profile of
// the largest burst once every pod runs (the operator's cache at its fullest).
func scaleSizes(t *testing.T) []int {
	env := os.Getenv("TATARA_SCALE_SIZES")
	if env == "" {
		return []int{1000, 10000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > kwokNodes*kwokNodePods {
			t.Fatalf("TATARA_SCALE_SIZES: %q is not a number from 1 to %d (the fake nodes' room)", f, kwokNodes*kwokNodePods)
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
	n int
	// allPods and allRunning are from the first create until every pod exists, and runs.
	allPods, allRunning time.Duration
	// toRunning is each Task's time from its create to its pod Running; toTaskDone from its pod
	// Succeeded to the Task Succeeded; both sorted.
	toRunning, toTaskDone []time.Duration
	requests              map[string]int64 // verb resource -> count, from the first create until settled
	heapPeak              uint64           // HeapInuse peak minus the baseline before the operator started
	heapLive              uint64           // HeapAlloc after a GC once every pod runs, minus the baseline's
	goroutines            int              // goroutine peak minus the baseline
	cpu                   time.Duration    // the test process's CPU time (user + system) over the run
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
	startKwokCluster(t)
	var results []scaleResult
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			results = append(results, runScale(t, n, n == sizes[len(sizes)-1]))
		})
	}
	if len(results) == len(sizes) {
		printScale(os.Stdout, results)
	}
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
func startCountedOperator(t *testing.T, counter *apiCounter) (stop func()) {
	t.Helper()
	opCfg := rest.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = -1, 0
	opCfg.WrapTransport = counter.wrap
	workers := scaleWorkers(t)
	fmt.Printf("operator: %d reconcile workers, no client-side rate limit\n", workers)
	return startOperatorOn(t, opCfg, func(o *manager.Options) { o.MaxConcurrentReconciles = workers }).stop
}

// waitQuiet returns once the operator has sent no request for quiet, or after limit.
func waitQuiet(c *apiCounter, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Since(time.Unix(0, c.last.Load())) < quiet && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// lifecycle records when the test's watches first saw each agent pod exist, run and succeed,
// and each Task succeed (creationTimestamp and status times have whole seconds only).
type lifecycle struct {
	mu                          sync.Mutex
	ours                        map[string]bool // namespaces of the run
	n                           int
	seen, running, podDone      map[string]time.Time // by pod "namespace/name"
	taskDone                    map[string]time.Time // by the Task's pod "namespace/name"
	allSeen, allRunning, allEnd chan struct{}
}

func newLifecycle(namespaces []string, n int) *lifecycle {
	l := &lifecycle{ours: map[string]bool{}, n: n,
		seen: make(map[string]time.Time, n), running: make(map[string]time.Time, n),
		podDone: make(map[string]time.Time, n), taskDone: make(map[string]time.Time, n),
		allSeen: make(chan struct{}), allRunning: make(chan struct{}), allEnd: make(chan struct{})}
	for _, ns := range namespaces {
		l.ours[ns] = true
	}
	return l
}

// mark records key's first time in m, and closes full when m holds every pod.
func (l *lifecycle) mark(m map[string]time.Time, key string, at time.Time, full chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := m[key]; dup {
		return
	}
	m[key] = at
	if len(m) == l.n && full != nil {
		close(full)
	}
}

func (l *lifecycle) watchPods(w watch.Interface) {
	for ev := range w.ResultChan() {
		now := time.Now()
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || !l.ours[p.Namespace] || ev.Type == watch.Deleted {
			continue
		}
		key := p.Namespace + "/" + p.Name
		l.mark(l.seen, key, now, l.allSeen)
		switch p.Status.Phase {
		case corev1.PodRunning:
			l.mark(l.running, key, now, l.allRunning)
		case corev1.PodSucceeded:
			l.mark(l.running, key, now, l.allRunning) // a Running missed between two events
			l.mark(l.podDone, key, now, nil)
		}
	}
}

func (l *lifecycle) watchTasks(w watch.Interface) {
	for ev := range w.ResultChan() {
		now := time.Now()
		task, ok := ev.Object.(*tatarav1.Task)
		if !ok || !l.ours[task.Namespace] || task.Status.Phase != tatarav1.PhaseSucceeded {
			continue
		}
		l.mark(l.taskDone, task.Namespace+"/"+agent.PodName(task.Name), now, l.allEnd)
	}
}

// wait blocks until done is closed, failing the test after timeout with what m holds.
func (l *lifecycle) wait(t *testing.T, done chan struct{}, m map[string]time.Time, what string, timeout time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(timeout):
		l.mu.Lock()
		got := len(m)
		l.mu.Unlock()
		t.Fatalf("only %d of %d %s within %s; %s", got, l.n, what, timeout, l.laggard(m))
	}
}

// laggard describes one of the run's pods that m does not hold yet, for a failure's message.
func (l *lifecycle) laggard(m map[string]time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key := range l.seen {
		if _, ok := m[key]; ok {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return fmt.Sprintf("pod %s: %v", key, err)
		}
		return fmt.Sprintf("pod %s: node %q, phase %s, conditions %+v", key, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions)
	}
	return "no pod of the run exists"
}

func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	fmt.Printf("heap profile once every pod runs: %s\n", path)
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runScale runs one burst of n Tasks; the largest is profiled when TATARA_SCALE_CPUPROFILE or
// TATARA_SCALE_HEAPPROFILE name a file (the test process's: operator and test clients).
func runScale(t *testing.T, n int, largest bool) scaleResult {
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
	life := newLifecycle(namespaces, n)
	pods, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: agent.LabelManagedBy + "=" + agent.ManagedByValue})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	go life.watchPods(pods)
	watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := watcher.Watch(ctx, &tatarav1.TaskList{})
	if err != nil {
		t.Fatal(err)
	}
	defer tasks.Stop()
	go life.watchTasks(tasks)

	// The baseline is taken after a GC with the test's own watches and clients in place, so the
	// deltas are the operator's (plus the burst's few creating goroutines).
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	baseGoroutines := runtime.NumGoroutine()
	samples := startSampler()
	counter := &apiCounter{counts: map[string]int64{}}
	cpuBefore := cpuTime(t)
	stopOperator := startCountedOperator(t, counter)
	stopped := false
	defer func() {
		if !stopped {
			stopOperator()
		}
	}()

	if path := os.Getenv("TATARA_SCALE_CPUPROFILE"); path != "" && largest {
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
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%05d", i), Namespace: ns},
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
	life.wait(t, life.allSeen, life.seen, "agent pods were created", timeout)
	life.wait(t, life.allRunning, life.running, "agent pods ran", timeout)
	// The live heap when the cache is at its fullest: every Task, pod and Secret in it.
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live)
	if path := os.Getenv("TATARA_SCALE_HEAPPROFILE"); path != "" && largest {
		writeHeapProfile(t, path)
	}
	life.wait(t, life.allEnd, life.taskDone, "Tasks Succeeded", timeout+kwokRunFor)

	// The operator keeps writing after the Tasks end (Events, Secrets): count until it settles.
	waitQuiet(counter, scaleQuiet, 2*time.Minute)
	end := counter.snapshot()
	cpu := cpuTime(t) - cpuBefore
	heap, goroutines := samples.finish()
	stopOperator()
	stopped = true

	life.mu.Lock()
	r := scaleResult{n: n, cpu: cpu, requests: map[string]int64{}, heapLive: live.HeapAlloc - min(live.HeapAlloc, base.HeapAlloc)}
	for i, name := range names {
		r.allPods = max(r.allPods, life.seen[name].Sub(begin))
		r.allRunning = max(r.allRunning, life.running[name].Sub(begin))
		r.toRunning = append(r.toRunning, max(0, life.running[name].Sub(created[i])))
		r.toTaskDone = append(r.toTaskDone, max(0, life.taskDone[name].Sub(life.podDone[name])))
	}
	life.mu.Unlock()
	for k, v := range end {
		if d := v - atStart[k]; d > 0 {
			r.requests[k] = d
		}
	}
	slices.Sort(r.toRunning)
	slices.Sort(r.toTaskDone)
	r.heapPeak, r.goroutines = heap-min(heap, base.HeapInuse), max(0, goroutines-baseGoroutines)
	return r
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
		{"time until every pod runs", false, func(r scaleResult) float64 { return ms(r.allRunning) }, "ms"},
		{"  per Task", true, func(r scaleResult) float64 { return ms(r.allRunning) / float64(r.n) }, "ms"},
		{"task->pod Running p50", false, func(r scaleResult) float64 { return ms(percentile(r.toRunning, 0.50)) }, "ms"},
		{"task->pod Running p99", false, func(r scaleResult) float64 { return ms(percentile(r.toRunning, 0.99)) }, "ms"},
		{"pod->Task Succeeded p50", false, func(r scaleResult) float64 { return ms(percentile(r.toTaskDone, 0.50)) }, "ms"},
		{"pod->Task Succeeded p99", false, func(r scaleResult) float64 { return ms(percentile(r.toTaskDone, 0.99)) }, "ms"},
		{"operator requests per Task", true, func(r scaleResult) float64 { return float64(r.totalRequests()) / float64(r.n) }, ""},
		{"peak heap in use (delta)", false, func(r scaleResult) float64 { return mb(r.heapPeak) }, "MiB"},
		{"  per Task", true, func(r scaleResult) float64 { return mb(r.heapPeak) / float64(r.n) * 1024 }, "KiB"},
		{"live heap, every pod running", false, func(r scaleResult) float64 { return mb(r.heapLive) }, "MiB"},
		{"  per Task", true, func(r scaleResult) float64 { return mb(r.heapLive) / float64(r.n) * 1024 }, "KiB"},
		{"CPU (test process)", false, func(r scaleResult) float64 { return r.cpu.Seconds() }, "s"},
		{"  per Task", true, func(r scaleResult) float64 { return ms(r.cpu) / float64(r.n) }, "ms"},
		{"peak goroutines (delta)", false, func(r scaleResult) float64 { return float64(r.goroutines) }, ""},
	}
	first, last := rs[0], rs[len(rs)-1]
	ratioLabel := fmt.Sprintf("%d/%d", last.n, first.n)
	_, _ = fmt.Fprintf(out, "\nscale: N Tasks created at once by %d clients over %d Projects, one in-process operator per N;\n", scaleCreators, scaleProjects)
	_, _ = fmt.Fprintf(out, "each pod scheduled by kube-scheduler onto %d kwok nodes, Running, then Succeeded %s later\n", kwokNodes, kwokRunFor)
	_, _ = fmt.Fprintf(out, "(real kube-apiserver + etcd via envtest; heap, goroutines and CPU are the test process's, which\n")
	_, _ = fmt.Fprintf(out, " holds the operator and the test's watches and clients; heap and goroutines over a baseline)\n\n")
	_, _ = fmt.Fprintf(out, "%-30s", "")
	for _, r := range rs {
		_, _ = fmt.Fprintf(out, " %12s", fmt.Sprintf("N=%d", r.n))
	}
	_, _ = fmt.Fprintf(out, " %11s\n", ratioLabel)
	var grows []string
	for _, rw := range rows {
		label := rw.name
		if rw.unit != "" {
			label += " (" + rw.unit + ")"
		}
		_, _ = fmt.Fprintf(out, "%-30s", label)
		for _, r := range rs {
			_, _ = fmt.Fprintf(out, " %12.2f", rw.value(r))
		}
		small, big := rw.value(first), rw.value(last)
		if len(rs) < 2 || small <= 0 || big <= 0 {
			_, _ = fmt.Fprintf(out, " %11s\n", "-")
			continue
		}
		ratio := big / small
		_, _ = fmt.Fprintf(out, " %10.2fx\n", ratio)
		// Within half again of the smaller N's figure counts as flat: one run on a shared
		// machine wobbles that much.
		if rw.per && ratio > 1.5 {
			grows = append(grows, fmt.Sprintf("%s %s (%.2fx)", strings.TrimSpace(rw.name), rw.unit, ratio))
		}
	}
	switch {
	case len(rs) < 2:
		_, _ = fmt.Fprintf(out, "\nno growth verdict: it needs two sizes\n")
	case len(grows) == 0:
		_, _ = fmt.Fprintf(out, "\nper-Task cost does not grow with N (every per-Task figure at N=%d is within 1.5x of N=%d)\n", last.n, first.n)
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
