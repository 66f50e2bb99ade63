package integration

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

const benchTasks = 50

// arrivals records when a watch first reports each object as ADDED.
type arrivals struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	waiters map[string]chan time.Time
}

func watchArrivals(b *testing.B, w watch.Interface) *arrivals {
	a := &arrivals{seen: map[string]time.Time{}, waiters: map[string]chan time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			now := time.Now()
			o, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			a.mu.Lock()
			if _, dup := a.seen[o.GetName()]; !dup {
				a.seen[o.GetName()] = now
				if c, ok := a.waiters[o.GetName()]; ok {
					c <- now
				}
			}
			a.mu.Unlock()
		}
	}()
	b.Cleanup(w.Stop)
	return a
}

// wait blocks until name was ADDED and returns when.
func (a *arrivals) wait(b *testing.B, name string) time.Time {
	a.mu.Lock()
	if t, ok := a.seen[name]; ok {
		a.mu.Unlock()
		return t
	}
	c := make(chan time.Time, 1)
	a.waiters[name] = c
	a.mu.Unlock()
	select {
	case t := <-c:
		return t
	case <-time.After(60 * time.Second):
		b.Fatalf("%s was not created within 60s", name)
		return time.Time{}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(p*float64(len(s))))-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkTaskToPod measures Task created -> agent pod object created against the real
// API server, over 50 Tasks created one at a time and 50 created in a burst. The baseline
// is the floor the API server sets: a ConfigMap created -> the same watch sees it. Figures
// are printed as milliseconds and as ratios to the baseline p50.
func BenchmarkTaskToPod(b *testing.B) {
	startOperator(b)
	ctx := context.Background()
	ns := newNamespace(b)
	newProject(b, ns, "p")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	podWatch, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cmWatch, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pods, cms := watchArrivals(b, podWatch), watchArrivals(b, cmWatch)

	for iter := 0; iter < b.N; iter++ {
		baseline := make([]time.Duration, 0, benchTasks)
		for i := range benchTasks {
			name := fmt.Sprintf("base-%d-%d", iter, i)
			start := time.Now()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"k": "v"}}
			if err := k8s.Create(ctx, cm); err != nil {
				b.Fatal(err)
			}
			baseline = append(baseline, cms.wait(b, name).Sub(start))
		}

		sequential := make([]time.Duration, 0, benchTasks)
		for i := range benchTasks {
			name := fmt.Sprintf("seq-%d-%d", iter, i)
			start := time.Now()
			newTask(b, ns, name, "p", tatarav1.KindImplement)
			sequential = append(sequential, pods.wait(b, agent.PodName(name)).Sub(start))
		}

		starts := make(map[string]time.Time, benchTasks)
		for i := range benchTasks {
			name := fmt.Sprintf("burst-%d-%d", iter, i)
			starts[name] = time.Now()
			newTask(b, ns, name, "p", tatarav1.KindReview)
		}
		burst := make([]time.Duration, 0, benchTasks)
		for name, start := range starts {
			burst = append(burst, pods.wait(b, agent.PodName(name)).Sub(start))
		}

		base50 := percentile(baseline, 0.50)
		fmt.Printf("task->pod over %d Tasks (real kube-apiserver + etcd, envtest):\n", benchTasks)
		for _, row := range []struct {
			name string
			d    []time.Duration
		}{{"baseline configmap->watch", baseline}, {"task->pod one at a time", sequential}, {"task->pod burst of 50", burst}} {
			p50, p95 := percentile(row.d, 0.50), percentile(row.d, 0.95)
			fmt.Printf("  %-27s p50 %7.2f ms  p95 %7.2f ms  (p50 %.1fx, p95 %.1fx baseline p50)\n",
				row.name, ms(p50), ms(p95), float64(p50)/float64(base50), float64(p95)/float64(base50))
		}
		b.ReportMetric(ms(percentile(sequential, 0.50)), "seq-p50-ms")
		b.ReportMetric(ms(percentile(sequential, 0.95)), "seq-p95-ms")
		b.ReportMetric(ms(percentile(burst, 0.50)), "burst-p50-ms")
		b.ReportMetric(ms(percentile(burst, 0.95)), "burst-p95-ms")
		b.ReportMetric(float64(percentile(sequential, 0.50))/float64(base50), "seq-p50/baseline")
	}
}
