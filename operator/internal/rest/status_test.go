package rest

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// TestStatusWritesOutlastConflicts: while other writers (a second replica during a rollout, the
// agent's parallel calls) keep changing the Task, a task_note retries its status write past the
// client-go default of 5 tries and lands once; when the conflicts never stop, the answer is a 503
// that the cli retries, not a 500.
func TestStatusWritesOutlastConflicts(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name      string
		conflicts int32
		wantCode  int
		wantNotes int
	}{
		{"conflicts beyond the client-go default", 7, http.StatusCreated, 1},
		{"conflicts that never stop", 1 << 30, http.StatusServiceUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var left atomic.Int32
			left.Store(tc.conflicts)
			conflicting := interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if left.Add(-1) >= 0 {
					return apierrors.NewConflict(schema.GroupResource{Group: "tatara.dev", Resource: "tasks"}, obj.GetName(), nil)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			}}
			// One fake for the cache and the API server: the calls' writes are what this is about.
			builder := fake.NewClientBuilder().WithScheme(f.scheme).WithObjects(f.running.DeepCopy(), f.project.DeepCopy(), f.secret.DeepCopy()).
				WithStatusSubresource(&tatarav1.Task{}).WithInterceptorFuncs(conflicting)
			if err := index.Register(context.Background(), fieldIndexer{builder}); err != nil {
				t.Fatal(err)
			}
			apiServer := builder.Build()
			s := New(Options{Client: apiServer, APIReader: apiServer})

			w := f.post(s, "/api/v1/tasks/t/notes", `{"text":"during a rollout"}`)
			if w.Code != tc.wantCode {
				t.Fatalf("task_note = %d %s, want %d", w.Code, w.Body, tc.wantCode)
			}
			if tc.wantCode == http.StatusServiceUnavailable && !strings.Contains(w.Body.String(), "retry") {
				t.Errorf("503 body %q does not tell the caller to retry", w.Body)
			}
			var after tatarav1.Task
			if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &after); err != nil {
				t.Fatal(err)
			}
			if got := len(after.Status.Notes); got != tc.wantNotes {
				t.Errorf("%d notes after the call, want %d", got, tc.wantNotes)
			}
		})
	}
}
