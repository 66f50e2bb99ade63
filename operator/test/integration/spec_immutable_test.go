package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestTaskSpecIsImmutable: every spec field the agent pod or the REST API's authorization is built
// from is refused by the API server once the Task exists, with a message naming the field; cancel
// stays settable. ref has its own test (TestTaskRefIsImmutable).
func TestTaskSpecIsImmutable(t *testing.T) {
	ns := newNamespace(t)
	create := func(name string, mutate func(*tatarav1.TaskSpec)) *tatarav1.Task {
		task := &tatarav1.Task{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"},
				Repo: "operator", Directive: "do it", Parent: "root"},
		}
		if mutate != nil {
			mutate(&task.Spec)
		}
		if err := k8s.Create(context.Background(), task); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return task
	}
	full := create("full", nil)
	bare := create("bare", func(s *tatarav1.TaskSpec) { s.Repo, s.Parent = "", "" })

	tests := []struct {
		name    string
		task    *tatarav1.Task
		patch   string
		wantErr string // "" = accepted
	}{
		{"kind changed", full, `{"spec":{"kind":"review"}}`, "kind is immutable"},
		{"projectRef changed", full, `{"spec":{"projectRef":{"name":"other"}}}`, "projectRef is immutable"},
		{"repo changed", full, `{"spec":{"repo":"cli"}}`, "repo is immutable"},
		{"repo removed", full, `{"spec":{"repo":null}}`, "repo is immutable"},
		{"repo added", bare, `{"spec":{"repo":"cli"}}`, "repo is immutable"},
		{"directive changed", full, `{"spec":{"directive":"do something else"}}`, "directive is immutable"},
		{"parent changed", full, `{"spec":{"parent":"other-root"}}`, "parent is immutable"},
		{"parent removed", full, `{"spec":{"parent":null}}`, "parent is immutable"},
		{"parent added", bare, `{"spec":{"parent":"root"}}`, "parent is immutable"},
		{"cancel set", bare, `{"spec":{"cancel":{"reason":"not needed"}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Patch(context.Background(), tt.task.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tt.patch)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want the CRD to refuse with %q, got %v", tt.wantErr, err)
			}
		})
	}
}
