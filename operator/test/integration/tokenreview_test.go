package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"tatara.dev/cli/pkg/profiles"
	"tatara.dev/cli/pkg/tasktoken"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestTokenReview: a backend that reviews the token the cli sends learns the Task it belongs to
// and what it may do while the Task is active, and that it is inactive once the Task has ended,
// or when it is not a token the operator minted.
func TestTokenReview(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "reviewed", "p", tatarav1.KindReview)
	tok := token(t, ns, task.Name)
	review := func(tok string) response {
		return call(t, op.url, "POST", "/api/v1/tokenreviews", "", fmt.Sprintf(`{"token":%q}`, tok))
	}
	reviewFor := func(audience, tok string) response {
		return call(t, op.url, "POST", "/api/v1/tokenreviews", "", fmt.Sprintf(`{"token":%q,"audience":%q}`, tok, audience))
	}
	memoryToken := tasktoken.ForAudience(tok, tasktoken.AudienceMemory)

	r := review(tok)
	wantTools, _ := profiles.Tools("review")
	if r.code != 200 || r.body["active"] != true || r.body["project"] != "p" || r.body["task"] != task.Name ||
		r.body["namespace"] != ns || r.body["kind"] != "review" || r.body["profile"] != "review" {
		t.Fatalf("review of an active token = %d %s", r.code, r.raw)
	}
	if tools, _ := r.body["tools"].([]any); len(tools) != len(wantTools) || !slices.Contains(tools, any("review_verdict")) {
		t.Errorf("tools %v, want the review profile's %d tools", tools, len(wantTools))
	}
	if ops, _ := r.body["operatorTools"].([]any); !slices.Contains(ops, any("review_verdict")) || slices.Contains(ops, any("subtask_create")) {
		t.Errorf("operatorTools %v, want review's (review_verdict, not subtask_create)", ops)
	}

	// A backend reviews the token the cli derived for it; what it received is worth nothing
	// anywhere else: not for another audience, not as a Task token, not at the REST API.
	if r := reviewFor(tasktoken.AudienceMemory, memoryToken); r.code != 200 || r.body["active"] != true || r.body["task"] != task.Name ||
		r.body["namespace"] != ns || r.body["audience"] != tasktoken.AudienceMemory {
		t.Fatalf("memory's review of its token = %d %s, want active for task %s", r.code, r.raw, task.Name)
	}
	for name, r := range map[string]response{
		"the memory token reviewed by chat":         reviewFor(tasktoken.AudienceChat, memoryToken),
		"the memory token reviewed as a Task token": review(memoryToken),
		"the Task token reviewed by memory":         reviewFor(tasktoken.AudienceMemory, tok),
		"a made-up token reviewed by memory":        reviewFor(tasktoken.AudienceMemory, mustNewToken(t)),
	} {
		if r.code != 200 || r.body["active"] != false {
			t.Errorf("%s = %d %s, want inactive", name, r.code, r.raw)
		}
	}
	if r := call(t, op.url, "GET", "/api/v1/tasks/"+task.Name, memoryToken, ""); r.code != 401 {
		t.Errorf("the memory token as a bearer at the REST API = %d %s, want 401", r.code, r.raw)
	}
	if r := reviewFor("operator", tok); r.code != 400 || !strings.Contains(fmt.Sprint(r.body["error"]), `unknown audience "operator"`) {
		t.Errorf("review for an unknown audience = %d %s, want 400 naming it", r.code, r.raw)
	}

	for name, other := range map[string]string{"a made-up token": mustNewToken(t), "not a token": "hello"} {
		if r := review(other); r.code != 200 || r.body["active"] != false {
			t.Errorf("review of %s = %d %s, want inactive", name, r.code, r.raw)
		}
	}
	if r := call(t, op.url, "POST", "/api/v1/tokenreviews", "", `{}`); r.code != 400 {
		t.Errorf("review without a token = %d %s, want 400", r.code, r.raw)
	}

	pod := waitPod(t, ns, task.Name)
	pod.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Update(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the ended Task's token reviewed as inactive", func() error {
		r := review(tok)
		if r.code != 200 || r.body["active"] != false || !strings.Contains(fmt.Sprint(r.body["reason"]), "has ended") {
			return fmt.Errorf("review = %d %s", r.code, r.raw)
		}
		if r := reviewFor(tasktoken.AudienceMemory, memoryToken); r.code != 200 || r.body["active"] != false {
			return fmt.Errorf("memory's review of its token = %d %s", r.code, r.raw)
		}
		return nil
	})
}
