package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/taskops"
)

// countTasks counts the Tasks of a namespace straight from the API server.
func countTasks(t testing.TB, ns string) int {
	t.Helper()
	var list tatarav1.TaskList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func subtaskBody(kind string) string {
	return fmt.Sprintf(`{"kind":%q,"repo":"cli","directive":"do the %s part"}`, kind, kind)
}

// createSubtask creates a subtask through the REST API and returns its name.
func createSubtask(t testing.TB, base, parent, tok, kind string) string {
	t.Helper()
	r := call(t, base, "POST", "/api/v1/tasks/"+parent+"/subtasks", tok, subtaskBody(kind))
	if r.code != 201 {
		t.Fatalf("subtask_create %s under %s = %d %s, want 201", kind, parent, r.code, r.raw)
	}
	name, _ := r.body["name"].(string)
	return name
}

// refused checks a subtask_create is answered with code and a message containing want, and that
// the namespace still holds wantTasks Tasks: nothing was created.
func refused(t testing.TB, base, ns, parent, tok, kind string, code int, want string, wantTasks int) {
	t.Helper()
	r := call(t, base, "POST", "/api/v1/tasks/"+parent+"/subtasks", tok, subtaskBody(kind))
	if msg, _ := r.body["error"].(string); r.code != code || !strings.Contains(msg, want) {
		t.Fatalf("subtask_create %s under %s = %d %s, want %d containing %q", kind, parent, r.code, r.raw, code, want)
	}
	if n := countTasks(t, ns); n != wantTasks {
		t.Fatalf("%d Tasks after a refused subtask_create, want %d", n, wantTasks)
	}
}

// TestSubtaskKindPolicy: an implement Task may not create a broader issueLifecycle subtask (the
// attack: a child with tools its parent lacks), and may still ask for a review.
func TestSubtaskKindPolicy(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	tok := token(t, ns, "impl")

	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindIssueLifecycle), 403,
		`subtask kind "issueLifecycle" is not allowed under a "implement" Task (allowed: implement, review)`, 1)
	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindSelfImprove), 403, `not allowed under a "implement" Task`, 1)
	sub := createSubtask(t, op.url, "impl", tok, string(tatarav1.KindReview))
	if n := countTasks(t, ns); n != 2 {
		t.Fatalf("%d Tasks after creating review %s, want 2", n, sub)
	}
}

// TestSubtaskChildrenLimit: a Task creates at most MaxChildrenPerTask subtasks over its life;
// cancelling one does not free a slot.
func TestSubtaskChildrenLimit(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	tok := token(t, ns, "impl")

	var subs []string
	for range taskops.MaxChildrenPerTask {
		subs = append(subs, createSubtask(t, op.url, "impl", tok, string(tatarav1.KindImplement)))
	}
	want := fmt.Sprintf("MaxChildrenPerTask is %d", taskops.MaxChildrenPerTask)
	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindReview), 429, want, taskops.MaxChildrenPerTask+1)

	if r := call(t, op.url, "POST", "/api/v1/tasks/impl/subtasks/"+subs[0]+"/cancel", tok, `{"reason":"churn"}`); r.code != 200 {
		t.Fatalf("cancel = %d %s", r.code, r.raw)
	}
	waitReason(t, ns, subs[0], tatarav1.ReasonCancelled)
	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindReview), 429, want, taskops.MaxChildrenPerTask+1)
}

// TestSubtaskDepthLimit: root -> child -> grandchild is allowed; the grandchild's own subtask
// would be at depth 3 and is refused.
func TestSubtaskDepthLimit(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newTask(t, ns, "root", "p", tatarav1.KindImplement)

	parent, tok := "root", token(t, ns, "root")
	for depth := 1; depth <= taskops.MaxSubtaskDepth; depth++ {
		parent = createSubtask(t, op.url, parent, tok, string(tatarav1.KindImplement))
		tok = token(t, ns, parent)
	}
	refused(t, op.url, ns, parent, tok, string(tatarav1.KindImplement), 429,
		fmt.Sprintf("MaxSubtaskDepth %d", taskops.MaxSubtaskDepth), taskops.MaxSubtaskDepth+1)
}

// TestSubtaskMaxActiveTasks: with spec.maxActiveTasks 2, the root Task and its first subtask
// are the two active Tasks; a third is refused.
func TestSubtaskMaxActiveTasks(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p", func(p *tatarav1.Project) { p.Spec.MaxActiveTasks = 2 })
	newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	tok := token(t, ns, "impl")

	createSubtask(t, op.url, "impl", tok, string(tatarav1.KindReview))
	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindReview), 429, "spec.maxActiveTasks is 2", 2)
}

// TestSubtaskLimitsUnderConcurrentRequests: twice MaxChildrenPerTask requests at once create
// exactly MaxChildrenPerTask subtasks; count and create are one step. With two replicas (leader
// election on, both serving the REST API, as production runs), requests split between them
// still create exactly that many: the step is one across replicas, not per process.
func TestSubtaskLimitsUnderConcurrentRequests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"one replica", 1}, {"two replicas", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			for range tc.replicas {
				var opts []opOption
				if tc.replicas > 1 {
					opts = append(opts, withLeaderElection())
				}
				urls = append(urls, startOperator(t, opts...).url)
			}
			ns := newNamespace(t)
			newProject(t, ns, "p")
			newTask(t, ns, "impl", "p", tatarav1.KindImplement)
			tok := token(t, ns, "impl")

			codes := make(chan int, 2*taskops.MaxChildrenPerTask)
			var wg sync.WaitGroup
			for i := range 2 * taskops.MaxChildrenPerTask {
				base := urls[i%len(urls)]
				wg.Go(func() {
					req, err := http.NewRequest(http.MethodPost, base+"/api/v1/tasks/impl/subtasks", strings.NewReader(subtaskBody("review")))
					if err != nil {
						t.Error(err)
						return
					}
					req.Header.Set("Authorization", "Bearer "+tok)
					req.Header.Set("Content-Type", "application/json")
					resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_ = resp.Body.Close()
					codes <- resp.StatusCode
				})
			}
			wg.Wait()
			close(codes)
			got := map[int]int{}
			for c := range codes {
				got[c]++
			}
			if got[201] != taskops.MaxChildrenPerTask || got[429] != taskops.MaxChildrenPerTask {
				t.Fatalf("status codes %v, want %d x 201 and %d x 429", got, taskops.MaxChildrenPerTask, taskops.MaxChildrenPerTask)
			}
			if n := countTasks(t, ns); n != taskops.MaxChildrenPerTask+1 {
				t.Fatalf("%d Tasks, want %d", n, taskops.MaxChildrenPerTask+1)
			}
		})
	}
}

// withLeaderElection runs the operator as production does with several replicas: the
// controllers on the Lease's holder only, the REST API on every replica.
func withLeaderElection() opOption {
	return func(o *manager.Options) {
		o.LeaderElection = true
		o.LeaderElectionNamespace = runtimeNS
	}
}
