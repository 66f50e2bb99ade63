package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// A Task of a kind this operator cannot map to a tool profile (written for a newer operator; a
// rollback keeps the newer CRD) waits with Ready=False UnknownKind, and no pod or Secret is made:
// its cli would otherwise serve every tool. A known kind in the same setup gets its Secret.
func TestUnknownKindStartsNoPod(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := tatarav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	project := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "agents"}}
	newTask := func(name string, kind tatarav1.TaskKind) *tatarav1.Task {
		return &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents", UID: types.UID("uid-" + name)},
			Spec: tatarav1.TaskSpec{Kind: kind, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Directive: "d"}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&tatarav1.Task{}).
		WithObjects(project, newTask("future", "Architect"), newTask("known", tatarav1.KindImplement)).Build()
	r := &TaskReconciler{Client: c, APIReader: c, Config: Config{RuntimeNamespace: "tatara-system"}}

	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "agents", Name: "future"}}); err != nil {
		t.Fatal(err)
	}
	var got tatarav1.Task
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "agents", Name: "future"}, &got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, tatarav1.ConditionReady)
	if got.Status.Phase != tatarav1.PhasePending || cond == nil || cond.Status != metav1.ConditionFalse ||
		cond.Reason != tatarav1.ReasonUnknownKind || !strings.Contains(cond.Message, `"Architect"`) {
		t.Fatalf("phase %s, Ready %+v; want Pending with Ready=False UnknownKind naming the kind", got.Status.Phase, cond)
	}
	var pods corev1.PodList
	var secrets corev1.SecretList
	if err := c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &secrets); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 || len(secrets.Items) != 0 {
		t.Fatalf("%d pods and %d Secrets for a Task of an unknown kind, want none", len(pods.Items), len(secrets.Items))
	}

	// The control: the same reconciler gets past the kind check for a known kind (it mints the
	// Task's token Secret, then waits for the runtime ConfigMaps this setup lacks).
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "agents", Name: "known"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &secrets); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Fatalf("%d Secrets after reconciling a known kind, want its token Secret", len(secrets.Items))
	}
}
