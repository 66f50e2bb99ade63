package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/rest"
)

// keyedCall is call with an Idempotency-Key header (key "" sends none).
func keyedCall(t *testing.T, base, path, tok, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(rest.IdempotencyKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestRESTIdempotencyKeys: a creating call sent twice with one Idempotency-Key (what the cli does
// after a connection lost mid-call during an operator rollout) creates once and answers the same;
// without a key, or with another one, it creates again; a malformed key is refused by name.
func TestRESTIdempotencyKeys(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	tok := token(t, ns, task.Name)

	brainstorm := newTask(t, ns, "brain", "p", tatarav1.KindBrainstorm)
	brainTok := token(t, ns, brainstorm.Name)
	postAs := func(tok, path, key, body string, want int) string {
		t.Helper()
		code, raw := keyedCall(t, op.url, path, tok, key, body)
		if code != want {
			t.Fatalf("POST %s with key %q = %d %s, want %d", path, key, code, raw, want)
		}
		return raw
	}
	post := func(path, key, body string, want int) string {
		t.Helper()
		return postAs(tok, path, key, body, want)
	}
	count := func(typ tatarav1.ActivityType, text string) int {
		t.Helper()
		var cur tatarav1.Task
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: task.Name}, &cur); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range append(cur.Status.Activity, cur.Status.Notes...) {
			if e.Type == typ && e.Text == text {
				n++
			}
		}
		return n
	}

	notes := "/api/v1/tasks/impl/notes"
	post(notes, "note-1", `{"text":"keyed"}`, http.StatusCreated)
	post(notes, "note-1", `{"text":"keyed"}`, http.StatusCreated)
	if n := count(tatarav1.ActivityNote, "keyed"); n != 1 {
		t.Errorf("a note sent twice with one key is recorded %d times, want 1", n)
	}
	post(notes, "note-2", `{"text":"keyed"}`, http.StatusCreated)
	post(notes, "", `{"text":"keyed"}`, http.StatusCreated)
	if n := count(tatarav1.ActivityNote, "keyed"); n != 3 {
		t.Errorf("the same note with another key and with none: recorded %d times in all, want 3", n)
	}

	for range 2 {
		postAs(brainTok, "/api/v1/tasks/brain/proposals", "proposal-1", `{"title":"flaky test","body":"seen twice"}`, http.StatusCreated)
	}
	var cur tatarav1.Task
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(brainstorm), &cur); err != nil {
		t.Fatal(err)
	}
	if n := len(cur.Status.Proposals); n != 1 {
		t.Errorf("a proposal sent twice with one key: %d proposals, want 1", n)
	}

	subtasks := "/api/v1/tasks/impl/subtasks"
	first := post(subtasks, "sub-1", `{"kind":"review","repo":"cli","directive":"review"}`, http.StatusCreated)
	again := post(subtasks, "sub-1", `{"kind":"review","repo":"cli","directive":"review"}`, http.StatusCreated)
	if name := jsonField(t, first, "name"); name == "" || jsonField(t, again, "name") != name {
		t.Errorf("subtask_create sent twice with one key answered %s, then %s: want the same subtask", first, again)
	}
	var all tatarav1.TaskList
	if err := k8s.List(context.Background(), &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if n := len(all.Items); n != 3 {
		t.Errorf("%d Tasks after one keyed subtask_create sent twice, want 3 (two Tasks and one subtask)", n)
	}

	for _, tc := range []struct{ name, key, want string }{
		{"too long", strings.Repeat("k", 65), "want 1 to 64"},
		{"forbidden characters", "a/b", "want 1 to 64"},
	} {
		raw := post(notes, tc.key, `{"text":"x"}`, http.StatusBadRequest)
		if !strings.Contains(raw, rest.IdempotencyKeyHeader) || !strings.Contains(raw, tc.want) {
			t.Errorf("%s key: answer %s does not name the header and the rule", tc.name, raw)
		}
	}
}

// jsonField is a string field of a JSON object answer, "" when absent.
func jsonField(t *testing.T, raw, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	s, _ := m[field].(string)
	return s
}
