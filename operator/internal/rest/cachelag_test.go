package rest

import (
	"context"
	corev1 "k8s.io/api/core/v1"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/token"
)

// TestWritesRecheckTheTaskAgainstTheAPIServer: authenticate reads the caller's Task from the
// cache, which can lag behind the API server. When the cache still says Running but the Task has
// ended (or its token was replaced), a write is refused with 401 and nothing is recorded:
// task_note, subtask_create and subtask_cancel, against a cache and an API server that disagree.
// fixture is one running Task "t" of Project "p" in namespace "ns", with its token and Secret.
type fixture struct {
	tok     string
	scheme  *runtime.Scheme
	running *tatarav1.Task
	project *tatarav1.Project
	secret  *corev1.Secret
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	tok, err := token.New()
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, tatarav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	running := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", UID: "task-uid"},
		Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Repo: "cli", Directive: "d"},
		Status:     tatarav1.TaskStatus{Phase: tatarav1.PhaseRunning, TokenHash: token.Hash(tok)},
	}
	project := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: tatarav1.ProjectSpec{Repos: []tatarav1.ProjectRepo{{Name: "cli", URL: "https://git.example.com/cli.git"}}, MaxActiveTasks: 50}}
	return fixture{tok: tok, scheme: scheme, running: running, project: project, secret: agent.BuildSecret(running, tok)}
}

// server is the REST API over a cache that holds the running Task and an API server that holds
// latest (the Task as it is now) and extra objects.
func (f fixture) server(t *testing.T, opts Options, latest *tatarav1.Task, extra ...client.Object) (*Server, client.Client) {
	t.Helper()
	cacheBuilder := fake.NewClientBuilder().WithScheme(f.scheme).WithObjects(f.running.DeepCopy(), f.project.DeepCopy(), f.secret.DeepCopy())
	if err := index.Register(context.Background(), fieldIndexer{cacheBuilder}); err != nil {
		t.Fatal(err)
	}
	apiServer := fake.NewClientBuilder().WithScheme(f.scheme).WithObjects(append([]client.Object{latest, f.project.DeepCopy()}, extra...)...).
		WithStatusSubresource(&tatarav1.Task{}, &tatarav1.InternalIssue{}).Build()
	opts.Client, opts.APIReader = cachedReads{Client: apiServer, cache: cacheBuilder.Build()}, apiServer
	return New(opts), apiServer
}

// cachedReads is the manager's client as the server gets it: reads from the cache, writes to the
// API server.
type cachedReads struct {
	client.Client
	cache client.Reader
}

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

// post sends one authenticated POST to the server's handler.
func (f fixture) post(s *Server, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+f.tok)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w
}

func TestWritesRecheckTheTaskAgainstTheAPIServer(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		latest func(*tatarav1.Task)
		want   string
	}{
		{"ended", func(t *tatarav1.Task) { t.Status.Phase = tatarav1.PhaseFailed }, "has ended"},
		{"cancelled", func(t *tatarav1.Task) { t.Spec.Cancel = &tatarav1.TaskCancel{Reason: "stop"} }, "has ended"},
		{"token replaced", func(t *tatarav1.Task) { t.Status.TokenHash = token.Hash("tatara_" + strings.Repeat("0", 64)) }, "invalid token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			latest := f.running.DeepCopy()
			tc.latest(latest)
			// The write that changed it moved its resourceVersion past the cached one's.
			latest.ResourceVersion = "1000"
			child := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t-child", Namespace: "ns"},
				Spec:   tatarav1.TaskSpec{Kind: tatarav1.KindReview, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Repo: "cli", Directive: "d", Parent: "t"},
				Status: tatarav1.TaskStatus{Phase: tatarav1.PhaseRunning}}
			s, apiServer := f.server(t, Options{}, latest, child)
			for _, req := range []struct{ path, body string }{
				{"/api/v1/tasks/t/notes", `{"text":"after the end"}`},
				{"/api/v1/tasks/t/subtasks", `{"kind":"review","repo":"cli","directive":"review it"}`},
				{"/api/v1/tasks/t/subtasks/t-child/cancel", `{"reason":"stop"}`},
			} {
				w := f.post(s, req.path, req.body)
				if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), tc.want) {
					t.Errorf("POST %s = %d %s, want 401 %q", req.path, w.Code, w.Body, tc.want)
				}
			}
			var after tatarav1.Task
			if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &after); err != nil {
				t.Fatal(err)
			}
			if len(after.Status.Activity) != 0 || len(after.Status.Notes) != 0 {
				t.Errorf("the refused calls wrote activity %v, notes %v", after.Status.Activity, after.Status.Notes)
			}
			var tasks tatarav1.TaskList
			if err := apiServer.List(context.Background(), &tasks); err != nil {
				t.Fatal(err)
			}
			if len(tasks.Items) != 2 {
				t.Errorf("%d Tasks on the API server, want the caller and its child: a refused subtask was created", len(tasks.Items))
			}
			for _, task := range tasks.Items {
				if task.Name == child.Name && task.Spec.Cancel != nil {
					t.Errorf("the refused cancel landed on %s: %+v", task.Name, task.Spec.Cancel)
				}
			}
		})
	}
}

// TestHandlersStopAtTheirDeadline: a subtask_create still waiting for its Project's lock when its
// handler deadline passes answers 503 and creates nothing, so no subtask appears after the client
// has been cut off by the write timeout.
func TestHandlersStopAtTheirDeadline(t *testing.T) {
	f := newFixture(t)
	s, apiServer := f.server(t, Options{Limits: Limits{HandlerTimeout: 100 * time.Millisecond}}, f.running.DeepCopy())
	unlock, err := s.ops.LockProject(context.Background(), "ns", "p")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		answered <- f.post(s, "/api/v1/tasks/t/subtasks", `{"kind":"review","repo":"cli","directive":"review it"}`)
	}()
	var w *httptest.ResponseRecorder
	select {
	case w = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("subtask_create behind a held lock never answered: its handler has no deadline")
	}
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "deadline") {
		t.Errorf("subtask_create behind a held lock = %d %s, want 503 naming the deadline", w.Code, w.Body)
	}
	var tasks tatarav1.TaskList
	if err := apiServer.List(context.Background(), &tasks); err != nil {
		t.Fatal(err)
	}
	if len(tasks.Items) != 1 {
		t.Errorf("%d Tasks, want only the caller: the timed-out request created a subtask", len(tasks.Items))
	}
}

// listCounter counts the cache's List calls.
type listCounter struct {
	client.Client
	lists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Client.List(ctx, list, opts...)
}

// TestUnknownTokenGraceIsBounded: an unknown token is looked up again during the grace while a
// waiting place is free, and refused after one lookup when every place is taken, or every place
// its own source address may hold: one pod flooding unknown tokens leaves places for the others.
func TestUnknownTokenGraceIsBounded(t *testing.T) {
	f := newFixture(t)
	unknown := "tatara_" + strings.Repeat("1", 64)
	const flooder, other = "10.0.0.7:40000", "10.0.0.8:40000"
	for _, tc := range []struct {
		name      string
		hold      func(g *graceSlots)
		from      string
		moreThan1 bool
	}{
		{"a place free: looked up again", func(*graceSlots) {}, other, true},
		{"every place taken: refused after one lookup", func(g *graceSlots) {
			for i := range cap(g.all) {
				if _, ok := g.take(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i % 250)})); !ok {
					t.Fatalf("place %d refused", i)
				}
			}
		}, other, false},
		{"its source's places taken: refused after one lookup", holdFrom(flooder), flooder, false},
		{"another source's places taken: looked up again", holdFrom(flooder), other, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := f.server(t, Options{}, f.running.DeepCopy())
			counter := &listCounter{Client: s.opts.Client}
			s.opts.Client = counter
			tc.hold(s.grace)
			r := httptest.NewRequest(http.MethodGet, "/api/v1/tasks/t", nil)
			r.RemoteAddr = tc.from
			r.Header.Set("Authorization", "Bearer "+unknown)
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("unknown token = %d %s, want 401", w.Code, w.Body)
			}
			if n := counter.lists.Load(); (n > 1) != tc.moreThan1 {
				t.Errorf("%d cache lookups, want more than one: %v", n, tc.moreThan1)
			}
		})
	}
}

// holdFrom takes every place one source address may hold.
func holdFrom(addr string) func(g *graceSlots) {
	return func(g *graceSlots) {
		src := netip.MustParseAddrPort(addr).Addr()
		for range maxTokenGraceWaitersPerSource {
			if _, ok := g.take(src); !ok {
				panic("a place of " + addr + " refused")
			}
		}
	}
}
