package taskops

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// noteCommitter records task_note calls with group commit: one status PATCH per Task per flush
// carries every note that arrived while the Task's previous write was in flight. The PATCH is a
// merge patch of status.notes and status.notesDropped under an optimistic lock (the base's
// resourceVersion), made without reading the Task: the base is the last write's answer, else the
// cached Task the call authenticated with. Only a conflict costs a read from the API server, which
// also re-checks that the caller's token still works. A note is answered once its PATCH succeeded:
// it is durable before the agent hears it was recorded, so a replica that dies loses nothing the
// agent was told of, and the cli's retry of an unanswered call (same Idempotency-Key) records the
// note once.
type noteCommitter struct {
	client client.Client
	// reader reads from the API server, after a conflict.
	reader client.Reader

	mu        sync.Mutex
	tasks     map[types.NamespacedName]*taskNotes
	lastSweep time.Time
}

// taskNotes is one Task's queue of notes and what its last write returned.
type taskNotes struct {
	pending  []*pendingNote
	flushing bool
	// written holds the resourceVersion, notes and notesDropped of the Task as the last write
	// returned them, for writtenFor: the cache lags behind a write, and a PATCH based on it would
	// conflict.
	written   *tatarav1.Task
	writtenAt time.Time
}

type pendingNote struct {
	// cached is the caller's Task as authentication read it from the cache.
	cached    *tatarav1.Task
	text      string
	requestID string
	at        metav1.Time
	done      chan noteResult
}

type noteResult struct {
	// recorded is false for a retry of a note that is already kept.
	recorded bool
	task     *tatarav1.Task
	err      *Error
}

const (
	// noteWrittenFor is how long a write's answer is preferred to the cache as the next base.
	noteWrittenFor = 10 * time.Second
	// noteFlushTimeout bounds one flush (its PATCH and conflict retries), detached from the
	// callers: the note of a caller that went away is still written for the others.
	noteFlushTimeout = 30 * time.Second
)

// Note records a task note of the caller, durable before it returns, and mirrors it as an Event;
// a retry of the call with the same requestID records nothing again.
func (s *Service) Note(ctx context.Context, caller *tatarav1.Task, text, requestID string) *Error {
	r := s.notes.record(ctx, caller, text, requestID)
	if r.err != nil {
		return r.err
	}
	if r.recorded {
		s.event(r.task, string(tatarav1.ActivityNote), ActionTaskNote, text)
	}
	return nil
}

// QueuedNotes is how many notes of the Task wait behind its note write in flight, to be written
// together by the next one (the HTTP tests of group commit wait on it).
func (s *Service) QueuedNotes(task types.NamespacedName) int {
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	if q := s.notes.tasks[task]; q != nil {
		return len(q.pending)
	}
	return 0
}

func newNoteCommitter(c client.Client, reader client.Reader) *noteCommitter {
	return &noteCommitter{client: c, reader: reader, tasks: map[types.NamespacedName]*taskNotes{}}
}

// record queues the note of the call and waits until it is written, or ctx ends.
func (n *noteCommitter) record(ctx context.Context, cached *tatarav1.Task, text, requestID string) noteResult {
	p := &pendingNote{cached: cached, text: text, requestID: requestID, at: metav1.Now(), done: make(chan noteResult, 1)}
	key := client.ObjectKeyFromObject(cached)
	n.mu.Lock()
	q := n.tasks[key]
	if q == nil {
		q = &taskNotes{}
		n.tasks[key] = q
	}
	q.pending = append(q.pending, p)
	lead := !q.flushing
	q.flushing = true
	n.mu.Unlock()
	if lead {
		go n.flush(key, q)
	}
	select {
	case r := <-p.done:
		return r
	case <-ctx.Done():
		return noteResult{err: errorf(Unavailable, "task_note of task %q not confirmed before the call ended: %v", cached.Name, ctx.Err())}
	}
}

// flush writes q's queued notes, one batch per PATCH, until none is left.
func (n *noteCommitter) flush(key types.NamespacedName, q *taskNotes) {
	ctx, cancel := context.WithTimeout(context.Background(), noteFlushTimeout)
	defer cancel()
	for {
		n.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.flushing = false
			n.sweep()
			n.mu.Unlock()
			return
		}
		base := q.written
		if base != nil && time.Since(q.writtenAt) > noteWrittenFor {
			base = nil
		}
		n.mu.Unlock()

		written, results := n.write(ctx, base, batch)
		n.mu.Lock()
		if written != nil {
			q.written, q.writtenAt = written, time.Now()
		}
		n.mu.Unlock()
		for i, p := range batch {
			p.done <- results[i]
		}
	}
}

// sweep forgets idle Tasks whose last write is older than noteWrittenFor, at most once a second.
// n.mu is held.
func (n *noteCommitter) sweep() {
	if time.Since(n.lastSweep) < time.Second {
		return
	}
	n.lastSweep = time.Now()
	for key, q := range n.tasks {
		if !q.flushing && len(q.pending) == 0 && time.Since(q.writtenAt) > noteWrittenFor {
			delete(n.tasks, key)
		}
	}
}

// write records batch with one PATCH, based on base (the last write's answer) or else on the
// newest cached Task of the batch; after a conflict, on the Task read from the API server. It
// returns the notes part of the Task as written, and each note's result.
func (n *noteCommitter) write(ctx context.Context, base *tatarav1.Task, batch []*pendingNote) (*tatarav1.Task, []noteResult) {
	cached := batch[len(batch)-1].cached
	if base == nil {
		base = notesOf(cached)
	}
	results := make([]noteResult, len(batch))
	var written *tatarav1.Task
	var aerr *Error
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		aerr = nil
		next, added := base.DeepCopy(), false
		for i, p := range batch {
			results[i].recorded = next.Status.AddNote(p.at, p.text, p.requestID)
			added = added || results[i].recorded
		}
		if !added {
			return nil // every note of the batch is a retry of one already kept
		}
		full := next.DeepCopy()
		err := n.client.Status().Patch(ctx, full, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			written = full
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		var latest tatarav1.Task
		if err := n.reader.Get(ctx, client.ObjectKeyFromObject(cached), &latest); err != nil {
			if apierrors.IsNotFound(err) {
				aerr = errorf(Unauthenticated, "invalid token")
				return nil
			}
			return err
		}
		if aerr = stillAuthenticated(cached, &latest); aerr != nil {
			return nil
		}
		base = notesOf(&latest)
		return err // the conflict: try again on latest
	})
	switch {
	case aerr != nil:
	case apierrors.IsConflict(err):
		aerr = errorf(Unavailable, "task %q is being written by others, retry: %v", cached.Name, err)
	case err != nil:
		aerr = errorf(Internal, "failed to record the notes of task %q: %v", cached.Name, err)
	}
	for i := range results {
		results[i].task, results[i].err = written, aerr
		if aerr != nil {
			results[i].recorded = false
		}
	}
	if written != nil {
		return notesOf(written), results
	}
	return nil, results
}

// notesOf is the part of t a note's PATCH is computed from: its identity, resourceVersion, notes
// and notesDropped.
func notesOf(t *tatarav1.Task) *tatarav1.Task {
	out := &tatarav1.Task{
		TypeMeta:   t.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, UID: t.UID, ResourceVersion: t.ResourceVersion},
	}
	out.Status.Notes = append([]tatarav1.ActivityEntry(nil), t.Status.Notes...)
	out.Status.NotesDropped = t.Status.NotesDropped
	return out
}
