package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/manager"
)

func withAgentNamespaces(ns ...string) opOption {
	return func(o *manager.Options) { o.AgentNamespaces = ns }
}

// TestAgentNamespacesScopeTheOperator: with --agent-namespaces set, a Task there gets its
// token Secret and pod and its token works on the REST API (whose reads go through the same
// scoped cache), while a Task in any other namespace is never seen: no Secret, no pod.
func TestAgentNamespacesScopeTheOperator(t *testing.T) {
	served, ignored := newNamespace(t), newNamespace(t)
	op := startOperator(t, withAgentNamespaces(served))
	for _, ns := range []string{served, ignored} {
		newProject(t, ns, "p")
		newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	}

	tok := token(t, served, "impl")
	eventually(t, 20*time.Second, "agent pod in the agent namespace", func() error {
		var pod corev1.Pod
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: served, Name: agent.PodName("impl")}, &pod)
	})
	if r := call(t, op.url, "GET", "/api/v1/tasks/impl", tok, ""); r.code != 200 {
		t.Errorf("GET own task with the token: %d %s", r.code, r.raw)
	}
	if r := call(t, op.url, "GET", "/api/v1/projects/p", tok, ""); r.code != 200 {
		t.Errorf("GET own project with the token: %d %s", r.code, r.raw)
	}

	// The served Task has been reconciled by now; the other had the same time and more.
	time.Sleep(2 * time.Second)
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ignored, Name: agent.SecretName("impl")}, &s); !apierrors.IsNotFound(err) {
		t.Errorf("token Secret of a Task outside the agent namespaces: err %v, want NotFound", err)
	}
	var pod corev1.Pod
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ignored, Name: agent.PodName("impl")}, &pod); !apierrors.IsNotFound(err) {
		t.Errorf("agent pod of a Task outside the agent namespaces: err %v, want NotFound", err)
	}
}

func TestParseNamespaces(t *testing.T) {
	for in, want := range map[string]string{"": "", " , ": "", "a": "a", "b, a ,b,,": "b|a"} {
		got := manager.ParseNamespaces(in)
		joined := ""
		for i, ns := range got {
			if i > 0 {
				joined += "|"
			}
			joined += ns
		}
		if joined != want {
			t.Errorf("ParseNamespaces(%q) = %v, want %q", in, got, want)
		}
	}
}
