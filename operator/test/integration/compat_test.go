package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestReconcilesObjectsOfReleasedVersions: the objects each released operator version stored
// (testdata/released/<version>, written as that release wrote them, status included) are
// accepted by today's CRDs and reconciled by today's operator: a pending Task gets its pod, a
// finished one keeps its status. This is what lets a pipeline upgrade a cluster full of Tasks.
// A release whose objects change shape adds its own directory.
func TestReconcilesObjectsOfReleasedVersions(t *testing.T) {
	releases, err := filepath.Glob(filepath.Join("testdata", "released", "*"))
	if err != nil || len(releases) == 0 {
		t.Fatalf("no released versions under testdata/released (%v)", err)
	}
	startOperator(t)
	for _, dir := range releases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ns := newNamespace(t)
			ctx := context.Background()
			var finished []*unstructured.Unstructured
			for _, file := range []string{"project.yaml", "tasks.yaml"} {
				raw, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				for _, doc := range strings.Split(string(raw), "\n---\n") {
					var obj map[string]any
					if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
						t.Fatalf("%s: %v", file, err)
					}
					u := &unstructured.Unstructured{Object: obj}
					status, hasStatus := obj["status"]
					delete(obj, "status")
					u.SetNamespace(ns)
					if err := k8s.Create(ctx, u); err != nil {
						t.Fatalf("today's CRD refuses %s %s of %s: %v", u.GetKind(), u.GetName(), filepath.Base(dir), err)
					}
					if hasStatus {
						// The running operator may write the new object between the create and
						// this update: put the stored status onto its latest version.
						err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
							if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
								return err
							}
							u.Object["status"] = status
							return k8s.Status().Update(ctx, u)
						})
						if err != nil {
							t.Fatalf("today's CRD refuses the status of %s %s of %s: %v", u.GetKind(), u.GetName(), filepath.Base(dir), err)
						}
						finished = append(finished, u.DeepCopy())
					}
				}
			}
			waitPod(t, ns, "released-pending")
			for _, want := range finished {
				var got tatarav1.Task
				if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: want.GetName()}, &got); err != nil {
					t.Fatal(err)
				}
				phase, _, _ := unstructured.NestedString(want.Object, "status", "phase")
				intent, _, _ := unstructured.NestedString(want.Object, "status", "outcome", "intent")
				stored := func(field string) int {
					l, _, _ := unstructured.NestedSlice(want.Object, "status", field)
					return len(l)
				}
				if string(got.Status.Phase) != phase || got.Status.Outcome == nil || got.Status.Outcome.Intent != intent ||
					len(got.Status.Attempts) != stored("attempts") || len(got.Status.Activity) != stored("activity") ||
					len(got.Status.Proposals) != stored("proposals") {
					t.Errorf("task %s of %s: status %+v, want it as stored (phase %s, outcome %s, %d attempts, %d activity entries, %d proposals)",
						want.GetName(), filepath.Base(dir), got.Status, phase, intent, stored("attempts"), stored("activity"), stored("proposals"))
				}
			}
		})
	}
}
