package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// notesServer is the REST API over a cache that never catches up (it keeps the Task as it was
// when the test began) and an API server whose status PATCHes pass through patched, which may
// hold them. It returns the API server and a count of the server's reads from it.
func notesServer(t *testing.T, f fixture, patched func()) (*Server, client.Client, *atomic.Int64) {
	t.Helper()
	running := f.running.DeepCopy()
	running.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, "pod tatara-agent-t created")
	cacheBuilder := fake.NewClientBuilder().WithScheme(f.scheme).WithObjects(running.DeepCopy(), f.project.DeepCopy(), f.secret.DeepCopy())
	if err := index.Register(context.Background(), fieldIndexer{cacheBuilder}); err != nil {
		t.Fatal(err)
	}
	apiServer := fake.NewClientBuilder().WithScheme(f.scheme).WithObjects(running, f.project.DeepCopy()).
		WithStatusSubresource(&tatarav1.Task{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patched()
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	reads := &readCounter{Reader: apiServer}
	return New(Options{Client: cachedReads{Client: apiServer, cache: cacheBuilder.Build()}, APIReader: reads}), apiServer, &reads.gets
}

// postKeyed is post with an Idempotency-Key.
func (f fixture) postKeyed(s *Server, path, body, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+f.tok)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w
}

type readCounter struct {
	client.Reader
	gets atomic.Int64
}

func (r *readCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestNotesAreGroupCommitted: the notes that arrive while a Task's write is in flight go out
// together in the next one, and none of them reads the Task from the API server.
func TestNotesAreGroupCommitted(t *testing.T) {
	f := newFixture(t)
	const calls = 40
	var patches atomic.Int64
	first, release := make(chan struct{}), make(chan struct{})
	s, apiServer, gets := notesServer(t, f, func() {
		if patches.Add(1) == 1 {
			close(first)
			<-release // the first write is in flight while the others arrive
		}
	})
	var wg sync.WaitGroup
	codes := make([]int, calls)
	wg.Go(func() { codes[0] = f.post(s, "/api/v1/tasks/t/notes", `{"text":"note 0"}`).Code })
	<-first
	for i := 1; i < calls; i++ {
		wg.Go(func() { codes[i] = f.post(s, "/api/v1/tasks/t/notes", fmt.Sprintf(`{"text":"note %d"}`, i)).Code })
	}
	// Every call is queued before the first write ends (the handler queues, then waits).
	deadline := time.Now().Add(30 * time.Second)
	for queued := 0; queued < calls-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notes queued behind the first write after 30 s", queued, calls-1)
		}
		queued = s.ops.QueuedNotes(client.ObjectKeyFromObject(f.running))
	}
	close(release)
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusCreated {
			t.Errorf("note %d answered %d, want 201", i, code)
		}
	}
	if got := patches.Load(); got != 2 {
		t.Errorf("%d status PATCHes for %d notes, want 2 (the first, then the %d queued behind it)", got, calls, calls-1)
	}
	if got := gets.Load(); got != 0 {
		t.Errorf("%d reads from the API server, want none", got)
	}
	var after tatarav1.Task
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &after); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range after.Status.Notes {
		seen[n.Text] = true
	}
	for i := range calls {
		if !seen[fmt.Sprintf("note %d", i)] {
			t.Errorf("note %d is missing from status.notes", i)
		}
	}
}

// TestNotesHaveTheirOwnBoundedHistory: one note after another (each its own write, the cache never
// catching up) keep at most MaxNotes, count the ones dropped, never touch the activity log, and
// never read the Task from the API server; a retry of a kept note records nothing.
func TestNotesHaveTheirOwnBoundedHistory(t *testing.T) {
	f := newFixture(t)
	var patches atomic.Int64
	s, apiServer, gets := notesServer(t, f, func() { patches.Add(1) })
	const sent = tatarav1.MaxNotes + 7
	for i := range sent {
		if w := f.post(s, "/api/v1/tasks/t/notes", fmt.Sprintf(`{"text":"note %d"}`, i)); w.Code != http.StatusCreated {
			t.Fatalf("note %d = %d %s", i, w.Code, w.Body)
		}
	}
	retry := func() int {
		w := f.postKeyed(s, "/api/v1/tasks/t/notes", `{"text":"keyed"}`, "key-1")
		return w.Code
	}
	if a, b := retry(), retry(); a != http.StatusCreated || b != http.StatusCreated {
		t.Fatalf("a note and its retry = %d, %d; want 201 for both", a, b)
	}
	var after tatarav1.Task
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &after); err != nil {
		t.Fatal(err)
	}
	st := after.Status
	if len(st.Notes) != tatarav1.MaxNotes || st.NotesDropped != sent+1-tatarav1.MaxNotes {
		t.Errorf("%d notes kept and %d dropped, want %d and %d", len(st.Notes), st.NotesDropped, tatarav1.MaxNotes, sent+1-tatarav1.MaxNotes)
	}
	if got := int64(len(st.Notes)) + st.NotesDropped; got != sent+1 {
		t.Errorf("kept + dropped = %d, want every note sent: %d", got, sent+1)
	}
	if last := st.Notes[len(st.Notes)-1]; last.Text != "keyed" || last.RequestID != "key-1" || st.Notes[len(st.Notes)-2].Text != fmt.Sprintf("note %d", sent-1) {
		t.Errorf("newest notes %+v, want the last numbered note then the keyed one, once", st.Notes[len(st.Notes)-2:])
	}
	if len(st.Activity) != 1 || st.Activity[0].Type != tatarav1.ActivityPod {
		t.Errorf("activity %+v, want only the pod entry: notes have their own history", st.Activity)
	}
	if got := patches.Load(); got != sent+1 {
		t.Errorf("%d PATCHes, want one per note that was not a retry (%d)", got, sent+1)
	}
	if got := gets.Load(); got != 0 {
		t.Errorf("%d reads from the API server, want none", got)
	}
}

// TestNotesNeverOverwriteAnotherWriter: a note based on a copy of the Task that another writer
// has since changed (another replica recorded a note) conflicts, is based again on the Task read
// from the API server, and keeps the other writer's note.
func TestNotesNeverOverwriteAnotherWriter(t *testing.T) {
	f := newFixture(t)
	s, apiServer, gets := notesServer(t, f, func() {})
	var other tatarav1.Task
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &other); err != nil {
		t.Fatal(err)
	}
	other.Status.AddNote(metav1.Now(), "from the other replica", "")
	if err := apiServer.Status().Update(context.Background(), &other); err != nil {
		t.Fatal(err)
	}
	if w := f.post(s, "/api/v1/tasks/t/notes", `{"text":"from this one"}`); w.Code != http.StatusCreated {
		t.Fatalf("task_note = %d %s", w.Code, w.Body)
	}
	var after tatarav1.Task
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(f.running), &after); err != nil {
		t.Fatal(err)
	}
	if n := after.Status.Notes; len(n) != 2 || n[0].Text != "from the other replica" || n[1].Text != "from this one" {
		t.Errorf("notes %+v, want the other replica's and then this one's", n)
	}
	if got := gets.Load(); got != 1 {
		t.Errorf("%d reads from the API server, want 1 (after the conflict)", got)
	}
}
