//go:build restload

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	restclient "k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/rest"
)

// The API priority and fairness bench (make bench-apf): the operator runs as its chart's
// ServiceAccount (not as envtest's administrator, whom priority and fairness exempts) under
// bench-rest's closed loop of agents, while a neighbour, another tenant's ServiceAccount, reads a
// ConfigMap 20 times a second. Twice: first with the API server's built-in flow schemas alone, where
// both ServiceAccounts share the workload-low level, then with the FlowSchema and
// PriorityLevelConfiguration the tatara-operator chart renders (TATARA_FLOWCONTROL_MANIFEST, which
// make bench-apf renders with helm). It prints the neighbour's latency, the agents' and the API
// server's 429s to the operator in each; it asserts no time.

const (
	operatorServiceAccount  = "system:serviceaccount:tatara-system:tatara-operator"
	neighbourServiceAccount = "system:serviceaccount:tenant:neighbour"
	// neighbourRate is how many reads a second the neighbour sends, each on time (an open loop).
	neighbourRate = 20
)

// TestRESTLoadNeighbour runs the two phases and prints one table.
func TestRESTLoadNeighbour(t *testing.T) {
	manifest := os.Getenv("TATARA_FLOWCONTROL_MANIFEST")
	flowControl := decodeManifest(t, manifest)
	if len(flowControl) != 2 {
		t.Fatalf("TATARA_FLOWCONTROL_MANIFEST=%q holds %d objects, want the chart's FlowSchema and PriorityLevelConfiguration (make bench-apf renders them)", manifest, len(flowControl))
	}
	conf := restLoadSettings(t)
	ctx := context.Background()

	opUser, neighbour := serviceAccountUser(t, operatorServiceAccount), serviceAccountUser(t, neighbourServiceAccount)
	rejected := &atomic.Int64{}
	opCfg := restclient.CopyConfig(opUser.Config())
	opCfg.QPS, opCfg.Burst = -1, 0
	opCfg.WrapTransport = countStatus(http.StatusTooManyRequests, rejected)
	limit := rest.RateLimit{PerSecond: rest.DefaultRateLimit, Burst: rest.DefaultRateBurst}
	op := startOperatorOn(t, opCfg, func(o *manager.Options) { o.APIRateLimit = limit })

	ns := newNamespace(t)
	if err := k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	read := neighbourReader(t, neighbour, ns)

	type phase struct {
		name       string
		neighbour  []time.Duration
		errors     int
		load       *loadResult
		apiServer  int64 // 429s the API server gave the operator
		flowSchema string
	}
	var phases []phase
	run := func(name string) {
		// Fresh Tasks for each phase: the first phase's notes would make the second's writes larger.
		agents := createRESTAgents(t, conf.agents)
		time.Sleep(2 * time.Second) // the setup's reconciles settle
		fs := classification(t, opUser)
		rejectedBefore := rejected.Load()
		var lat []time.Duration
		var errs int
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() { lat, errs = openLoop(read, neighbourRate, stop) })
		load := runRESTLoad(t, op.url, agents, conf.duration)
		close(stop)
		wg.Wait()
		phases = append(phases, phase{name, lat, errs, load, rejected.Load() - rejectedBefore, fs})
	}

	run("built-in flow schemas")
	for _, o := range flowControl {
		if err := k8s.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o.DeepCopy()) })
	}
	var fsObj unstructured.Unstructured
	fsObj.SetGroupVersionKind(flowControl[0].GroupVersionKind())
	for _, o := range flowControl {
		if o.GetKind() == "FlowSchema" {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), &fsObj); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The API server takes up a new FlowSchema asynchronously.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return classification(t, opUser) == string(fsObj.GetUID()), nil
	}); err != nil {
		t.Fatalf("the operator's requests never went to the chart's FlowSchema %s: %v", fsObj.GetName(), err)
	}
	run("the chart's own level")

	p := func(format string, args ...any) { fmt.Printf(format, args...) }
	msAt := func(d []time.Duration, q float64) float64 {
		if len(d) == 0 {
			return 0
		}
		return float64(percentile(d, q).Microseconds()) / 1000
	}
	p("\nAPI priority and fairness: the operator as its ServiceAccount under %d agents' closed loop of\n", conf.agents)
	p("task_get and task_note for %s, a neighbour ServiceAccount reading a ConfigMap %d times a second\n", conf.duration, neighbourRate)
	p("(real kube-apiserver + etcd via envtest; everything shares the machine's %d cores)\n\n", runtime.NumCPU())
	p("%-24s %14s %14s %8s %12s %12s %12s %12s\n", "", "neighbour p50", "neighbour p99", "errors", "notes/s", "note p50", "note p99", "API 429s")
	for _, ph := range phases {
		notes := ph.load.latencies["task_note"]
		p("%-24s %11.1f ms %11.1f ms %8d %12.1f %9.0f ms %9.0f ms %12d\n", ph.name,
			msAt(ph.neighbour, 0.50), msAt(ph.neighbour, 0.99), ph.errors,
			float64(ph.load.ok["task_note"])/ph.load.elapsed.Seconds(), msAt(notes, 0.50), msAt(notes, 0.99), ph.apiServer)
	}
	for _, ph := range phases {
		if n := len(ph.load.unexpected); n > 0 {
			t.Errorf("%s: %d unexpected answers to the agents, the first: %s", ph.name, n, ph.load.unexpected[0])
		}
	}
}

// serviceAccountUser is a client identity of the ServiceAccount name (as the API server would
// authenticate its token) with cluster-admin, so only priority and fairness tells it apart.
func serviceAccountUser(t *testing.T, name string) *envtest.AuthenticatedUser {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-apf-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if err := k8s.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	return u
}

// classification is the UID of the FlowSchema the API server puts user's requests in.
func classification(t *testing.T, user *envtest.AuthenticatedUser) string {
	t.Helper()
	hc, err := restclient.HTTPClientFor(user.Config())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(user.Config().Host + "/api/v1/namespaces/default/configmaps?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
}

// neighbourReader returns a function that reads the ConfigMap as user and says how long it took.
func neighbourReader(t *testing.T, user *envtest.AuthenticatedUser, ns string) func() (time.Duration, error) {
	t.Helper()
	// No client-side limit (client-go's default is 5 a second): the API server alone decides.
	nc := restclient.CopyConfig(user.Config())
	nc.QPS, nc.Burst = -1, 0
	c, err := client.New(nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return func() (time.Duration, error) {
		start := time.Now()
		var cm corev1.ConfigMap
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
		return time.Since(start), err
	}
}

// openLoop calls read rate times a second, each call on time in its own goroutine, until stop.
func openLoop(read func() (time.Duration, error), rate int, stop <-chan struct{}) ([]time.Duration, int) {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			wg.Wait()
			return lat, errs
		case <-tick.C:
			wg.Go(func() {
				d, err := read()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs++
					return
				}
				lat = append(lat, d)
			})
		}
	}
}

// countStatus counts the answers with status code.
func countStatus(code int, n *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == code {
				n.Add(1)
			}
			return resp, err
		})
	}
}

// decodeManifest reads the objects of a multi-document YAML file.
func decodeManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("TATARA_FLOWCONTROL_MANIFEST=%q: %v (make bench-apf renders it from the chart)", path, err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}
