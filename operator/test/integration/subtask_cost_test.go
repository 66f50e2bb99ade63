package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/taskops"
)

// taskListReads records the Task LISTs (not watches) one operator sends to the API server and
// the bytes of their answers.
type taskListReads struct {
	mu    sync.Mutex
	lists int
	bytes int64
	query []string
}

func (r *taskListReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/tasks") || req.URL.Query().Get("watch") == "true" {
			return resp, err
		}
		body, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		r.mu.Lock()
		r.lists++
		r.bytes += int64(len(body))
		r.query = append(r.query, req.URL.RawQuery)
		r.mu.Unlock()
		return resp, rerr
	})
}

func (r *taskListReads) reset() (lists int, bytes int64, query []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lists, bytes, query = r.lists, r.bytes, r.query
	r.lists, r.bytes, r.query = 0, 0, nil
	return lists, bytes, query
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSubtaskCreateReadsOnlyWhatItDecides: the cost of subtask_create does not grow with the
// finished Tasks of a namespace (they are never removed) or with other Projects' Tasks. With
// finishedTasks large finished Tasks beside the caller, an accepted call reads from the API server
// only the caller's children and its Project's active Tasks (field selectors), less than one
// finished Task's bytes in all; a call that is over a limit is refused from the cache with no
// Task LIST at all.
func TestSubtaskCreateReadsOnlyWhatItDecides(t *testing.T) {
	const finishedTasks = 30
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	big := strings.Repeat("x", tatarav1.MaxActivityText)
	for i := range finishedTasks {
		project := []string{"p", "other"}[i%2]
		done := newTask(t, ns, fmt.Sprintf("done-%02d", i), project, tatarav1.KindImplement)
		done.Status.Phase = tatarav1.PhaseSucceeded
		for range tatarav1.MaxActivity {
			done.Status.AddActivity(metav1.Now(), tatarav1.ActivityNote, big)
		}
		if err := k8s.Status().Update(context.Background(), done); err != nil {
			t.Fatalf("failed to finish %s: %v", done.Name, err)
		}
	}
	finishedBytes := tatarav1.MaxActivity * tatarav1.MaxActivityText

	reads := &taskListReads{}
	opCfg := rest.CopyConfig(cfg)
	opCfg.WrapTransport = reads.wrap
	op := startOperatorOn(t, opCfg)
	tok := token(t, ns, "impl")

	reads.reset()
	createSubtask(t, op.url, "impl", tok, string(tatarav1.KindReview))
	lists, bytes, query := reads.reset()
	t.Logf("an accepted subtask_create: %d Task LISTs, %d bytes (%v); one finished Task holds over %d bytes", lists, bytes, query, finishedBytes)
	if bytes >= int64(finishedBytes) {
		t.Errorf("an accepted subtask_create read %d bytes of Tasks from the API server in %d LISTs (%v), at least one finished Task's %d",
			bytes, lists, query, finishedBytes)
	}
	for _, q := range query {
		if !strings.Contains(q, "fieldSelector=") {
			t.Errorf("a Task LIST without a field selector: %q", q)
		}
	}

	for range taskops.MaxChildrenPerTask - 1 {
		createSubtask(t, op.url, "impl", tok, string(tatarav1.KindReview))
	}
	// The cache must hold the last child before a refusal can come from it.
	eventually(t, 10*time.Second, "the cache to hold every child", func() error {
		var list tatarav1.TaskList
		if err := op.GetClient().List(context.Background(), &list, client.InNamespace(ns), client.MatchingFields{"spec.parent": "impl"}); err != nil {
			return err
		}
		if len(list.Items) != taskops.MaxChildrenPerTask {
			return fmt.Errorf("%d children in the cache", len(list.Items))
		}
		return nil
	})
	reads.reset()
	refused(t, op.url, ns, "impl", tok, string(tatarav1.KindReview), 429, "MaxChildrenPerTask", 1+finishedTasks+taskops.MaxChildrenPerTask)
	// refused itself counts the Tasks with the test's own client, not the operator's.
	if lists, bytes, query := reads.reset(); lists != 0 {
		t.Errorf("a refused subtask_create sent %d Task LISTs (%d bytes, %v) to the API server, want 0", lists, bytes, query)
	}
}
