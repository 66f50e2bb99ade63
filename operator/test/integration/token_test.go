package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	tokenpkg "tatara.dev/operator/internal/token"
)

// The Task token: only the Secret the operator minted, for a Task still at work, authenticates.

// mustNewToken mints a token of the real shape, as an attacker can.
func mustNewToken(t testing.TB) string {
	t.Helper()
	tok, err := tokenpkg.New()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// consistently401 calls path with tok for a while and fails on any answer but 401: a Secret the
// operator's cache has long seen still authenticates nobody.
func consistently401(t testing.TB, base, method, path, tok, body string) response {
	t.Helper()
	var r response
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r = call(t, base, method, path, tok, body); r.code != 401 {
			t.Fatalf("%s %s = %d %s, want 401", method, path, r.code, r.raw)
		}
	}
	return r
}

func secretGone(ns, task string) error {
	var s corev1.Secret
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.SecretName(task)}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("secret %s still exists", s.Name)
}

// TestEndedTaskTokenIsRejected: once its Task has ended (Succeeded, Failed, Cancelled), a token
// gets 401 on writes it could make before (task_note, subtask_create), and its Secret is deleted.
func TestEndedTaskTokenIsRejected(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	podEnds := func(phase corev1.PodPhase) func(t *testing.T, task *tatarav1.Task) {
		return func(t *testing.T, task *tatarav1.Task) {
			pod := waitPod(t, ns, task.Name)
			pod.Status.Phase = phase
			if err := k8s.Status().Update(context.Background(), &pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel := func(t *testing.T, task *tatarav1.Task) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":{"reason":"enough"}}}`))
		if err := k8s.Patch(context.Background(), task, patch); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		end   func(t *testing.T, task *tatarav1.Task)
		phase tatarav1.TaskPhase
	}{
		{"succeeded", podEnds(corev1.PodSucceeded), tatarav1.PhaseSucceeded},
		{"failed", podEnds(corev1.PodFailed), tatarav1.PhaseFailed},
		{"cancelled", cancel, tatarav1.PhaseCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := newTask(t, ns, "ended-"+tt.name, "p", tatarav1.KindImplement)
			tok := token(t, ns, task.Name)
			waitPod(t, ns, task.Name)
			notes := "/api/v1/tasks/" + task.Name + "/notes"
			if r := call(t, op.url, "POST", notes, tok, `{"text":"working"}`); r.code != 201 {
				t.Fatalf("task_note while active = %d %s", r.code, r.raw)
			}

			tt.end(t, task)
			eventually(t, 20*time.Second, "task to end "+string(tt.phase), func() error {
				if p := getTask(t, ns, task.Name).Status.Phase; p != tt.phase {
					return fmt.Errorf("phase %q", p)
				}
				return nil
			})
			for _, c := range []struct{ tool, path, body string }{
				{"task_note", notes, `{"text":"after the end"}`},
				{"subtask_create", "/api/v1/tasks/" + task.Name + "/subtasks", `{"kind":"review","repo":"cli","directive":"review it"}`},
			} {
				eventually(t, 10*time.Second, c.tool+" refused after the end", func() error {
					r := call(t, op.url, "POST", c.path, tok, c.body)
					if msg, _ := r.body["error"].(string); r.code != 401 || !strings.Contains(msg, "has ended") {
						return fmt.Errorf("%s = %d %s, want 401 saying the task has ended", c.tool, r.code, r.raw)
					}
					return nil
				})
			}
			eventually(t, 20*time.Second, "the token Secret of the ended task to be deleted", func() error {
				return secretGone(ns, task.Name)
			})
			// Still refused once the Secret is gone, and the refused calls left no trace.
			consistently401(t, op.url, "POST", notes, tok, `{"text":"after the end"}`)
			var subs tatarav1.TaskList
			if err := k8s.List(context.Background(), &subs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, s := range subs.Items {
				if s.Spec.Parent == task.Name {
					t.Fatalf("an ended task's token created subtask %s", s.Name)
				}
			}
			for _, a := range getTask(t, ns, task.Name).Status.Activity {
				if strings.Contains(a.Text, "after the end") {
					t.Fatalf("an ended task's token wrote activity %+v", a)
				}
			}
		})
	}
}

// TestForgedSecretIsRejected: a Secret under another name, with the operator's labels and a
// controller owner reference to the victim Task, does not authenticate as the victim.
func TestForgedSecretIsRejected(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	victim := newTask(t, ns, "victim", "p", tatarav1.KindImplement)
	own := token(t, ns, victim.Name)

	forgedTok := mustNewToken(t)
	forged := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "forged-token", Namespace: ns, Labels: agent.Labels(victim),
			OwnerReferences: []metav1.OwnerReference{agent.OwnerReference(victim)},
		},
		Data: map[string][]byte{agent.TokenKey: []byte(forgedTok)},
	}
	if err := k8s.Create(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	r := consistently401(t, op.url, "GET", "/api/v1/tasks/victim", forgedTok, "")
	if msg, _ := r.body["error"].(string); !strings.Contains(msg, "invalid token") {
		t.Fatalf("error %q, want invalid token", msg)
	}
	consistently401(t, op.url, "POST", "/api/v1/tasks/victim/notes", forgedTok, `{"text":"forged"}`)
	if r := call(t, op.url, "GET", "/api/v1/tasks/victim", own, ""); r.code != 200 {
		t.Fatalf("the victim's own token = %d %s, want 200", r.code, r.raw)
	}
}

// TestPlantedSecretIsReplaced: a Secret already under the expected name before the operator
// mints one is never adopted, whether it is unlabelled (outside the operator's cache) or made to
// look exactly like the operator's (labels, controller owner reference to the Task, the state a
// reconcile interrupted before recording the token's hash leaves): the operator deletes it and
// mints a fresh token; the planted token gets 401 and the new one works.
func TestPlantedSecretIsReplaced(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	tests := []struct {
		name  string
		plant func(task *tatarav1.Task) metav1.ObjectMeta
	}{
		{"unlabelled", func(*tatarav1.Task) metav1.ObjectMeta { return metav1.ObjectMeta{} }},
		{"owned by the task", func(task *tatarav1.Task) metav1.ObjectMeta {
			return metav1.ObjectMeta{Labels: agent.Labels(task), OwnerReferences: []metav1.OwnerReference{agent.OwnerReference(task)}}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The Task waits for its Project, so the Secret is planted before the operator mints.
			project := fmt.Sprintf("later-%d", i)
			task := newTask(t, ns, fmt.Sprintf("planted-%d", i), project, tatarav1.KindImplement)
			waitReason(t, ns, task.Name, tatarav1.ReasonProjectNotFound)
			planted := mustNewToken(t)
			meta := tt.plant(task)
			meta.Name, meta.Namespace = agent.SecretName(task.Name), ns
			secret := &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{agent.TokenKey: []byte(planted)}}
			if err := k8s.Create(context.Background(), secret); err != nil {
				t.Fatal(err)
			}
			newProject(t, ns, project)

			pod := waitPod(t, ns, task.Name)
			var fresh string
			eventually(t, 20*time.Second, "the planted secret to be replaced", func() error {
				var s corev1.Secret
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(secret), &s); err != nil {
					return err
				}
				if s.UID == secret.UID || string(s.Data[agent.TokenKey]) == planted {
					return fmt.Errorf("the planted secret %s is still there", s.UID)
				}
				if o := metav1.GetControllerOf(&s); o == nil || o.UID != task.UID {
					return fmt.Errorf("secret controlled by %+v", o)
				}
				fresh = string(s.Data[agent.TokenKey])
				return nil
			})
			if tok := token(t, ns, task.Name); tok != fresh || !tokenpkg.Valid(tok) {
				t.Fatalf("token %q, want the fresh %q", tok, fresh)
			}
			// The pod is created before the status write that names it.
			eventually(t, 20*time.Second, "the status to record the fresh token and the pod", func() error {
				if got := getTask(t, ns, task.Name); got.Status.TokenHash != tokenpkg.Hash(fresh) || got.Status.PodName != pod.Name {
					return fmt.Errorf("status tokenHash %q pod %q, want the fresh token's hash and pod %s", got.Status.TokenHash, got.Status.PodName, pod.Name)
				}
				return nil
			})
			path := "/api/v1/tasks/" + task.Name
			eventually(t, 10*time.Second, "the fresh token to work", func() error {
				if r := call(t, op.url, "GET", path, fresh, ""); r.code != 200 {
					return fmt.Errorf("fresh token = %d %s", r.code, r.raw)
				}
				return nil
			})
			consistently401(t, op.url, "GET", path, planted, "")
		})
	}
}
