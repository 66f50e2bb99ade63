package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	tokenpkg "tatara.dev/operator/internal/token"
)

// token reads a Task's token from its real Secret, as the kubelet would for TATARA_TOKEN, once
// the Task's status records its hash (the operator writes it right after creating the Secret).
func token(t testing.TB, ns, task string) string {
	t.Helper()
	var s corev1.Secret
	eventually(t, 20*time.Second, "token secret of "+task+" recorded in its status", func() error {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.SecretName(task)}, &s); err != nil {
			return err
		}
		var got tatarav1.Task
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: task}, &got); err != nil {
			return err
		}
		if h := tokenpkg.Hash(string(s.Data[agent.TokenKey])); got.Status.TokenHash != h {
			return fmt.Errorf("status.tokenHash %q, the Secret's token hashes to %q", got.Status.TokenHash, h)
		}
		return nil
	})
	return string(s.Data[agent.TokenKey])
}

type response struct {
	code int
	body map[string]any
	raw  string
}

func call(t testing.TB, base, method, path, tok, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	r := response{code: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return r
}

// TestRESTStatusCodes drives every rule of the contract through a real HTTP server with
// tokens read from real Secrets; the calls run in order (intents depend on earlier ones).
func TestRESTStatusCodes(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newProject(t, ns, "other")
	impl := newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	review := newTask(t, ns, "rev", "p", tatarav1.KindReview)
	brain := newTask(t, ns, "brain", "p", tatarav1.KindBrainstorm)
	stranger := newTask(t, ns, "stranger", "other", tatarav1.KindImplement)
	implTok, revTok, brainTok := token(t, ns, impl.Name), token(t, ns, review.Name), token(t, ns, brain.Name)
	strangerTok := token(t, ns, stranger.Name)
	big := `{"text":"` + strings.Repeat("x", 17<<10) + `"}`

	steps := []struct {
		name        string
		method      string
		path        string
		tok         string
		body        string
		code        int
		errContains string
		check       func(t *testing.T, r response)
	}{
		{name: "no token", method: "GET", path: "/api/v1/tasks/impl", code: 401, errContains: "bearer token"},
		{name: "unknown token", method: "GET", path: "/api/v1/tasks/impl", tok: "tatara_" + strings.Repeat("0", 64), code: 401, errContains: "invalid token"},
		{name: "not a token's shape", method: "GET", path: "/api/v1/tasks/impl", tok: strings.Repeat("0", 64), code: 401, errContains: "invalid token"},
		{name: "own task", method: "GET", path: "/api/v1/tasks/impl", tok: implTok, code: 200, check: func(t *testing.T, r response) {
			if r.body["name"] != "impl" || r.body["kind"] != "implement" || r.body["project"] != "p" {
				t.Fatalf("task view %v", r.body)
			}
		}},
		{name: "another task", method: "GET", path: "/api/v1/tasks/rev", tok: implTok, code: 403, errContains: `not "rev"`},
		{name: "another task's notes", method: "POST", path: "/api/v1/tasks/rev/notes", tok: implTok, body: `{"text":"x"}`, code: 403},
		{name: "own project", method: "GET", path: "/api/v1/projects/p", tok: implTok, code: 200},
		{name: "another project", method: "GET", path: "/api/v1/projects/other", tok: implTok, code: 403, errContains: `not "other"`},
		{name: "repos", method: "GET", path: "/api/v1/projects/p/repos", tok: implTok, code: 200, check: func(t *testing.T, r response) {
			if repos, _ := r.body["repos"].([]any); len(repos) != 2 {
				t.Fatalf("repos %v", r.body)
			}
		}},
		{name: "unknown route", method: "GET", path: "/api/v1/nothing", tok: implTok, code: 404},
		{name: "tool outside the kind's table", method: "POST", path: "/api/v1/tasks/impl/intents/review_verdict", tok: implTok,
			body: `{"verdict":"approve","summary":"s"}`, code: 403, errContains: "review_verdict is not allowed"},
		{name: "task_list not allowed for implement", method: "GET", path: "/api/v1/projects/p/tasks", tok: implTok, code: 403},
		{name: "note", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: `{"text":"started"}`, code: 201},
		{name: "malformed JSON", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: `{"text":`, code: 400, errContains: "malformed JSON"},
		{name: "wrong field type", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: `{"text":5}`, code: 400, errContains: `field "text" must be a string`},
		{name: "unknown field", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: `{"txt":"a"}`, code: 400, errContains: `unknown field "txt"`},
		{name: "missing field", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: `{}`, code: 400, errContains: `field "text" is required`},
		{name: "empty body", method: "POST", path: "/api/v1/tasks/impl/comments", tok: implTok, code: 400, errContains: "empty"},
		{name: "body over the limit", method: "POST", path: "/api/v1/tasks/impl/notes", tok: implTok, body: big, code: 413, errContains: "limit"},
		{name: "bad enum", method: "POST", path: "/api/v1/tasks/impl/intents/pr_outcome", tok: implTok, body: `{"outcome":"done"}`, code: 400, errContains: `field "outcome" is "done"`},
		{name: "comment", method: "POST", path: "/api/v1/tasks/impl/comments", tok: implTok, body: `{"body":"pushed a fix"}`, code: 201},
		{name: "change_summary", method: "POST", path: "/api/v1/tasks/impl/intents/change_summary", tok: implTok, body: `{"summary":"fix"}`, code: 200},
		{name: "change_summary again, same", method: "POST", path: "/api/v1/tasks/impl/intents/change_summary", tok: implTok, body: `{ "summary" : "fix" }`, code: 200,
			check: func(t *testing.T, r response) {
				if r.body["result"] != "idempotent" {
					t.Fatalf("result %v", r.body["result"])
				}
			}},
		{name: "change_summary again, different", method: "POST", path: "/api/v1/tasks/impl/intents/change_summary", tok: implTok, body: `{"summary":"other"}`, code: 409},
		{name: "pr_outcome", method: "POST", path: "/api/v1/tasks/impl/intents/pr_outcome", tok: implTok, body: `{"outcome":"opened","url":"https://git.example.test/pr/1"}`, code: 200,
			check: func(t *testing.T, r response) {
				if r.body["result"] != "recorded" {
					t.Fatalf("result %v", r.body["result"])
				}
			}},
		{name: "pr_outcome again, same", method: "POST", path: "/api/v1/tasks/impl/intents/pr_outcome", tok: implTok, body: `{"url":"https://git.example.test/pr/1","outcome":"opened"}`, code: 200},
		{name: "pr_outcome again, different: replaces", method: "POST", path: "/api/v1/tasks/impl/intents/pr_outcome", tok: implTok, body: `{"outcome":"merged"}`, code: 200,
			check: func(t *testing.T, r response) {
				if r.body["result"] != "replaced" {
					t.Fatalf("result %v", r.body["result"])
				}
			}},
		{name: "another outcome intent: the last one stands", method: "POST", path: "/api/v1/tasks/impl/intents/pr_outcome", tok: implTok, body: `{"outcome":"opened","url":"https://git.example.test/pr/1"}`, code: 200,
			check: func(t *testing.T, r response) {
				outcome, _ := r.body["outcome"].(map[string]any)
				if r.body["result"] != "replaced" || outcome["value"] != "opened" {
					t.Fatalf("result %v outcome %v", r.body["result"], outcome)
				}
			}},
		{name: "decline needs a reason", method: "POST", path: "/api/v1/tasks/impl/intents/decline_implementation", tok: implTok, body: `{"reason":""}`, code: 400, errContains: `field "reason"`},
		{name: "subtask with a repo outside the project", method: "POST", path: "/api/v1/tasks/impl/subtasks", tok: implTok,
			body: `{"kind":"review","repo":"nope","directive":"review it"}`, code: 400, errContains: `no repo "nope"`},
		{name: "subtask with a bad kind", method: "POST", path: "/api/v1/tasks/impl/subtasks", tok: implTok,
			body: `{"kind":"deploy","repo":"cli","directive":"d"}`, code: 400, errContains: `field "kind"`},
		{name: "subtask of a task that is not ours", method: "GET", path: "/api/v1/tasks/impl/subtasks/rev", tok: implTok, code: 403, errContains: "not a subtask"},
		{name: "unknown subtask", method: "GET", path: "/api/v1/tasks/impl/subtasks/ghost", tok: implTok, code: 404},
		{name: "review verdict by the review task", method: "POST", path: "/api/v1/tasks/rev/intents/review_verdict", tok: revTok, body: `{"verdict":"approve","summary":"lgtm"}`, code: 200},
		{name: "review may not propose", method: "POST", path: "/api/v1/tasks/rev/proposals", tok: revTok, body: `{"title":"t","body":"b"}`, code: 403},
		{name: "brainstorm proposes", method: "POST", path: "/api/v1/tasks/brain/proposals", tok: brainTok, body: `{"title":"Add retries","body":"because","repo":"cli"}`, code: 201},
		{name: "brainstorm issue comment", method: "POST", path: "/api/v1/tasks/brain/issue-comments", tok: brainTok, body: `{"issue":12,"body":"dup of #3"}`, code: 201},
		{name: "issue must be an integer", method: "POST", path: "/api/v1/tasks/brain/issue-comments", tok: brainTok, body: `{"issue":"12","body":"b"}`, code: 400, errContains: `field "issue" must be an integer`},
		{name: "proposal list", method: "GET", path: "/api/v1/projects/p/proposals", tok: brainTok, code: 200, check: func(t *testing.T, r response) {
			ps, _ := r.body["proposals"].([]any)
			if len(ps) != 1 || ps[0].(map[string]any)["title"] != "Add retries" || ps[0].(map[string]any)["task"] != "brain" {
				t.Fatalf("proposals %v", r.body)
			}
		}},
		{name: "task list filtered by kind", method: "GET", path: "/api/v1/projects/p/tasks?kind=review", tok: brainTok, code: 200, check: func(t *testing.T, r response) {
			ts, _ := r.body["tasks"].([]any)
			if len(ts) != 1 || ts[0].(map[string]any)["name"] != "rev" {
				t.Fatalf("tasks %v", r.body)
			}
		}},
		{name: "task list with a bad kind", method: "GET", path: "/api/v1/projects/p/tasks?kind=nope", tok: brainTok, code: 400, errContains: `"kind"`},
		{name: "skip research", method: "POST", path: "/api/v1/tasks/brain/intents/skip_research", tok: brainTok, body: `{"reason":"nothing new"}`, code: 200},
		{name: "stranger cannot read our project", method: "GET", path: "/api/v1/projects/p", tok: strangerTok, code: 403},
	}
	for _, s := range steps {
		r := call(t, op.url, s.method, s.path, s.tok, s.body)
		if r.code != s.code {
			t.Fatalf("%s: %s %s = %d %s, want %d", s.name, s.method, s.path, r.code, r.raw, s.code)
		}
		if r.code >= 400 {
			msg, _ := r.body["error"].(string)
			if msg == "" || !strings.Contains(msg, s.errContains) {
				t.Fatalf("%s: error %q, want it to contain %q", s.name, msg, s.errContains)
			}
		}
		if s.check != nil {
			s.check(t, r)
		}
	}

	// Recorded durably in the Task status through the API server...
	got := getTask(t, ns, impl.Name)
	if got.Status.Outcome == nil || got.Status.Outcome.Intent != "pr_outcome" || got.Status.Outcome.Value != "opened" || got.Status.ChangeSummary != "fix" {
		t.Fatalf("impl status outcome %+v summary %q", got.Status.Outcome, got.Status.ChangeSummary)
	}
	var types []string
	for _, a := range got.Status.Activity {
		types = append(types, string(a.Type))
	}
	for _, want := range []string{"Comment", "Intent"} {
		if !strings.Contains(strings.Join(types, ","), want) {
			t.Fatalf("activity %v lacks %s", types, want)
		}
	}
	if slices.Contains(types, string(tatarav1.ActivityNote)) || len(got.Status.Notes) == 0 {
		t.Fatalf("activity %v and notes %+v: want the note in notes, apart from the activity log", types, got.Status.Notes)
	}
	if b := getTask(t, ns, brain.Name); len(b.Status.Proposals) != 1 || b.Status.Outcome.Intent != "skip_research" {
		t.Fatalf("brain status %+v", b.Status)
	}
	// ...and as Events.
	eventually(t, 20*time.Second, "events for task impl", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		reasons := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Name == "impl" {
				reasons[e.Reason] = true
			}
		}
		for _, want := range []string{"Note", "Comment", "Intent"} {
			if !reasons[want] {
				return fmt.Errorf("no %s event yet (have %v)", want, reasons)
			}
		}
		return nil
	})
	if n := testutil.ToFloat64(op.Metrics.IntentsRecorded.WithLabelValues("pr_outcome", "replaced")); n != 2 {
		t.Fatalf("intents_total{pr_outcome,replaced} = %v, want 2", n)
	}
	if n := testutil.ToFloat64(op.Metrics.APIRequests.WithLabelValues("change_summary", "409")); n != 1 {
		t.Fatalf("api_requests_total{change_summary,409} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(op.Metrics.IntentsRecorded.WithLabelValues("change_summary", "idempotent")); n != 1 {
		t.Fatalf("intents_total{change_summary,idempotent} = %v, want 1", n)
	}
}

func TestRESTSubtasks(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	parent := newTask(t, ns, "parent", "p", tatarav1.KindImplement)
	tok := token(t, ns, parent.Name)

	r := call(t, op.url, "POST", "/api/v1/tasks/parent/subtasks", tok, `{"kind":"review","repo":"cli","directive":"review my change"}`)
	if r.code != 201 {
		t.Fatalf("subtask_create = %d %s", r.code, r.raw)
	}
	sub, _ := r.body["name"].(string)
	if !strings.HasPrefix(sub, "parent-sub-") || r.body["parent"] != "parent" || r.body["kind"] != "review" {
		t.Fatalf("subtask %v", r.body)
	}
	// The subtask is a real Task: the controller gives it its own pod with the review profile.
	pod := waitPod(t, ns, sub)
	if p := profileOf(pod.Spec.Containers[0]); p != "review" {
		t.Fatalf("subtask profile %q", p)
	}
	eventually(t, 10*time.Second, "subtask in list", func() error {
		r := call(t, op.url, "GET", "/api/v1/tasks/parent/subtasks", tok, "")
		if subs, _ := r.body["subtasks"].([]any); r.code != 200 || len(subs) != 1 {
			return fmt.Errorf("subtask_list = %d %s", r.code, r.raw)
		}
		return nil
	})
	if r := call(t, op.url, "GET", "/api/v1/tasks/parent/subtasks/"+sub, tok, ""); r.code != 200 || r.body["name"] != sub {
		t.Fatalf("subtask_get = %d %s", r.code, r.raw)
	}
	// The subtask's own token cannot act on its parent.
	subTok := token(t, ns, sub)
	if r := call(t, op.url, "GET", "/api/v1/tasks/parent", subTok, ""); r.code != 403 {
		t.Fatalf("subtask token on parent = %d", r.code)
	}
	// A part of the work it split off (not a review of its own change) the parent may cancel.
	part := createSubtask(t, op.url, "parent", tok, string(tatarav1.KindImplement))
	for i, want := range []string{"recorded", "idempotent"} {
		r := call(t, op.url, "POST", "/api/v1/tasks/parent/subtasks/"+part+"/cancel", tok, `{"reason":"not needed"}`)
		if r.code != 200 || r.body["result"] != want {
			t.Fatalf("cancel #%d = %d %s, want 200 %s", i, r.code, r.raw, want)
		}
	}
	waitReason(t, ns, part, tatarav1.ReasonCancelled)
}

// TestImplementerDoesNotControlItsReview: a Task may not cancel a review it asked for, and sees
// neither the review's activity nor its verdict until the review ends; then it sees the verdict
// that stands, the reviewer's last. This holds for an implement Task's review of its own change
// and for a coordinator's review of a delegate's branch alike.
func TestImplementerDoesNotControlItsReview(t *testing.T) {
	for _, tc := range []struct {
		kind tatarav1.TaskKind
		body string
	}{
		{tatarav1.KindImplement, subtaskBody(string(tatarav1.KindReview))},
		{tatarav1.KindIssueLifecycle, `{"kind":"review","repo":"cli","ref":"tatara/delegate-0123abcd","directive":"approve it"}`},
	} {
		t.Run(string(tc.kind), func(t *testing.T) { testCallerDoesNotControlItsReview(t, tc.kind, tc.body) })
	}
}

func testCallerDoesNotControlItsReview(t *testing.T, kind tatarav1.TaskKind, body string) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newTask(t, ns, "impl", "p", kind)
	tok := token(t, ns, "impl")
	created := call(t, op.url, "POST", "/api/v1/tasks/impl/subtasks", tok, body)
	review, _ := created.body["name"].(string)
	if created.code != 201 || review == "" {
		t.Fatalf("subtask_create review = %d %s, want 201", created.code, created.raw)
	}
	pod := waitPod(t, ns, review)
	revTok := token(t, ns, review)

	for _, v := range []string{`{"verdict":"approve","summary":"first"}`, `{"verdict":"request_changes","summary":"last"}`} {
		if r := call(t, op.url, "POST", "/api/v1/tasks/"+review+"/intents/review_verdict", revTok, v); r.code != 200 {
			t.Fatalf("review_verdict %s = %d %s", v, r.code, r.raw)
		}
	}
	if r := call(t, op.url, "POST", "/api/v1/tasks/"+review+"/notes", revTok, `{"text":"reading the diff"}`); r.code != 201 {
		t.Fatalf("review note = %d %s", r.code, r.raw)
	}
	r := call(t, op.url, "POST", "/api/v1/tasks/impl/subtasks/"+review+"/cancel", tok, `{"reason":"I changed my mind"}`)
	if msg, _ := r.body["error"].(string); r.code != 403 || !strings.Contains(msg, "may not cancel it") {
		t.Fatalf("the implementer cancelling its review = %d %s, want 403", r.code, r.raw)
	}
	eventually(t, 10*time.Second, "the cache to hold the review's verdict", func() error {
		var rev tatarav1.Task
		if err := op.GetClient().Get(context.Background(), types.NamespacedName{Namespace: ns, Name: review}, &rev); err != nil {
			return err
		}
		if rev.Status.Outcome == nil || len(rev.Status.Activity) == 0 || len(rev.Status.Notes) == 0 {
			return fmt.Errorf("outcome %v, %d activity entries, %d notes", rev.Status.Outcome, len(rev.Status.Activity), len(rev.Status.Notes))
		}
		return nil
	})
	r = call(t, op.url, "GET", "/api/v1/tasks/impl/subtasks/"+review, tok, "")
	if r.code != 200 || r.body["outcome"] != nil || r.body["activity"] != nil || r.body["notes"] != nil {
		t.Fatalf("subtask_get of a running review = %d %s, want no outcome, no activity and no notes", r.code, r.raw)
	}
	r = call(t, op.url, "GET", "/api/v1/tasks/impl/subtasks", tok, "")
	if strings.Contains(r.raw, "request_changes") || strings.Contains(r.raw, "approve") {
		t.Fatalf("subtask_list shows the running review's verdict: %s", r.raw)
	}

	setPodStatus(t, &pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodSucceeded
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: agent.WrapperContainer, Image: wrapperImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	})
	waitReason(t, ns, review, tatarav1.ReasonPodSucceeded)
	eventually(t, 10*time.Second, "the ended review's verdict", func() error {
		r := call(t, op.url, "GET", "/api/v1/tasks/impl/subtasks/"+review, tok, "")
		outcome, _ := r.body["outcome"].(map[string]any)
		if r.code != 200 || outcome["value"] != "request_changes" {
			return fmt.Errorf("subtask_get = %d %s", r.code, r.raw)
		}
		return nil
	})
}

// TestTokenOfDeletedTaskIsRejected: a Secret left behind (no garbage collector in envtest)
// must not authenticate once its Task is gone.
func TestTokenOfDeletedTaskIsRejected(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "gone", "p", tatarav1.KindReview)
	tok := token(t, ns, task.Name)
	if r := call(t, op.url, "GET", "/api/v1/tasks/gone", tok, ""); r.code != 200 {
		t.Fatalf("before delete = %d %s", r.code, r.raw)
	}
	if err := k8s.Delete(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "401 after delete", func() error {
		if r := call(t, op.url, "GET", "/api/v1/tasks/gone", tok, ""); r.code != 401 {
			return fmt.Errorf("got %d", r.code)
		}
		return nil
	})
	// Recreated under the same name before any garbage collection: the operator replaces
	// the stale Secret, the old token stays rejected and the new one works.
	again := newTask(t, ns, "gone", "p", tatarav1.KindReview)
	var newTok string
	eventually(t, 20*time.Second, "a fresh token secret for the recreated task", func() error {
		var s corev1.Secret
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.SecretName("gone")}, &s); err != nil {
			return err
		}
		if o := metav1.GetControllerOf(&s); o == nil || o.UID != again.UID {
			return fmt.Errorf("secret still owned by %+v", o)
		}
		// Only a token whose hash the recreated Task's status records is the one it keeps: a
		// Secret minted by a reconcile that could not record its hash is replaced.
		if h := tokenpkg.Hash(string(s.Data[agent.TokenKey])); getTask(t, ns, "gone").Status.TokenHash != h {
			return fmt.Errorf("the recreated task's status does not record the secret's token (yet)")
		}
		newTok = string(s.Data[agent.TokenKey])
		return nil
	})
	if newTok == tok {
		t.Fatal("the recreated task inherited the old token")
	}
	if r := call(t, op.url, "GET", "/api/v1/tasks/gone", tok, ""); r.code != 401 {
		t.Fatalf("old token on a recreated task = %d, want 401", r.code)
	}
	eventually(t, 10*time.Second, "the new token to work", func() error {
		if r := call(t, op.url, "GET", "/api/v1/tasks/gone", newTok, ""); r.code != 200 {
			return fmt.Errorf("got %d %s", r.code, r.raw)
		}
		return nil
	})
}
