package integration

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestStatusWritersLoseNothing: a Task's status has two writers, the controller (phase, attempts,
// conditions, its activity entries) and the REST API (the agent's notes), in different processes'
// goroutines and, across replicas, in different processes. Both write under the API server's
// optimistic lock, so neither overwrites the other. Here the agents post notes and outcome intents
// while their pods start running and then end, so the controller's writes land between the API's,
// in the activity list both append to: every call answered with success must be in the final
// status, every refusal must be the ended Task's, and the controller's end and activity must be
// intact.
func TestStatusWritersLoseNothing(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	// Each round posts a note and an outcome intent (a pr_outcome with a new URL replaces the last and
	// adds an activity entry, in the list the controller appends to): 20 rounds stay under MaxNotes
	// and, with the controller's few entries, under MaxActivity, so no bound drops anything.
	const tasks, rounds = 6, 20
	names := make([]string, tasks)
	for i := range names {
		names[i] = fmt.Sprintf("writers-%d", i)
		newTask(t, ns, names[i], "p", tatarav1.KindImplement)
	}

	accepted := make([][]string, tasks) // note texts answered 201
	outcomes := make([][]string, tasks) // pr_outcome URLs answered 200, in order
	var wg sync.WaitGroup
	for i, name := range names {
		pod := waitPod(t, ns, name)
		tok := token(t, ns, name)
		// Two callers per agent, as an agent's parallel tool calls are: notes and intents.
		calls := func(path string, body func(n int) (string, string), want int, ok *[]string, progress chan<- int) {
			defer wg.Done()
			if progress != nil {
				defer close(progress)
			}
			for n := range rounds {
				value, b := body(n)
				code, resp, err := post(op.url, name, path, tok, b)
				switch {
				case err != nil:
					t.Errorf("%s of %s: %v", path, name, err)
					return
				case code == want:
					*ok = append(*ok, value)
				case code == http.StatusUnauthorized && strings.Contains(resp, "has ended"):
					return // the Task ended: the token no longer works
				default:
					t.Errorf("%s %s of %s: %d %s, want %d or the ended Task's refusal", path, b, name, code, resp, want)
					return
				}
				if progress != nil {
					progress <- n
				}
			}
		}
		progress := make(chan int, rounds)
		wg.Add(2)
		go calls("notes", func(n int) (string, string) {
			text := fmt.Sprintf("%s note %d", name, n)
			return text, `{"text":"` + text + `"}`
		}, http.StatusCreated, &accepted[i], nil)
		go calls("intents/pr_outcome", func(n int) (string, string) {
			url := fmt.Sprintf("https://git.example.test/%s/pr/%d", name, n)
			return url, `{"outcome":"opened","url":"` + url + `"}`
		}, http.StatusOK, &outcomes[i], progress)
		// The controller writes the status on the pod's start and on its end, between the API's.
		for n := range progress {
			switch n {
			case 2:
				setPodStatus(t, &pod, func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning })
			case 8:
				setPodStatus(t, &pod, func(s *corev1.PodStatus) { s.Phase = corev1.PodSucceeded })
			}
		}
	}
	wg.Wait()

	for i, name := range names {
		got := waitEnded(t, ns, name, tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded)
		var kept []string
		for _, n := range got.Status.Notes {
			kept = append(kept, n.Text)
		}
		for _, text := range accepted[i] {
			if !slices.Contains(kept, text) {
				t.Errorf("%s: note %q was answered 201 but is not in the status (kept %d of %d: %q)", name, text, len(kept), len(accepted[i]), kept)
			}
		}
		if len(outcomes[i]) < 9 || got.Status.NotesDropped != 0 {
			t.Errorf("%s: %d outcomes accepted, %d notes dropped; want at least the 9 before the pod's end, none dropped", name, len(outcomes[i]), got.Status.NotesDropped)
		}
		for _, url := range outcomes[i] {
			if !slices.ContainsFunc(got.Status.Activity, func(e tatarav1.ActivityEntry) bool { return strings.Contains(e.Text, url) }) {
				t.Errorf("%s: the outcome %s was answered 200 but its activity entry is gone: %+v", name, url, got.Status.Activity)
			}
		}
		if o := got.Status.Outcome; len(outcomes[i]) > 0 && (o == nil || !strings.Contains(o.Body, outcomes[i][len(outcomes[i])-1])) {
			t.Errorf("%s: outcome %+v, want the last one recorded (%s)", name, o, outcomes[i][len(outcomes[i])-1])
		}
		if !slices.ContainsFunc(got.Status.Activity, func(e tatarav1.ActivityEntry) bool {
			return e.Type == tatarav1.ActivityPod && strings.Contains(e.Text, "created")
		}) {
			t.Errorf("%s: the controller's pod activity entry is gone: %+v", name, got.Status.Activity)
		}
		if len(got.Status.Attempts) != 1 {
			t.Errorf("%s: %d attempts recorded, want 1", name, len(got.Status.Attempts))
		}
	}
}

// post is a call of the Task's REST API for a goroutine: it returns errors instead of failing the
// test.
func post(base, task, path, tok, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/tasks/"+task+"/"+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}
