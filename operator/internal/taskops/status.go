package taskops

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Status writes: every recorded call re-reads the Task, changes its status through the API
// server (retrying on conflicts) and mirrors the change as an Event.

// conflictBackoff spreads the re-read-and-write attempts of status writes and subtask cancels
// over about 1.5 s (10 tries, well inside a REST call's timeout): during an operator rollout two
// replicas' controllers and the agent's own calls write the same Task, and the client-go default
// (5 tries within ~50 ms) ran out there and failed agents' task_note calls. No Cap: reaching a Backoff's Cap ends its steps.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// updateStatus re-reads the caller's Task from the API server, applies mutate and writes the
// status, retrying on conflicts. mutate returns false when nothing changed (no write). A Task that
// ended, or whose token changed, since authentication read it from the cache is Unauthenticated
// and no write.
func (s *Service) updateStatus(ctx context.Context, task *tatarav1.Task, mutate func(*tatarav1.Task) (bool, *Error)) (*tatarav1.Task, *Error) {
	var oerr *Error
	var latest tatarav1.Task
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		oerr = nil
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(task), &latest); err != nil {
			return err
		}
		if oerr = stillAuthenticated(task, &latest); oerr != nil {
			return nil
		}
		changed, merr := mutate(&latest)
		if merr != nil {
			oerr = merr
			return nil
		}
		if !changed {
			return nil
		}
		return s.opts.Client.Status().Update(ctx, &latest)
	})
	if apierrors.IsConflict(err) {
		// Still contended after the backoff: Unavailable is what the cli retries (with the
		// call's Idempotency-Key, so the retry records nothing twice).
		return nil, errorf(Unavailable, "task %q is being written by others, retry: %v", task.Name, err)
	}
	if err != nil {
		return nil, errorf(Internal, "failed to update status of task %q: %v", task.Name, err)
	}
	return &latest, oerr
}

// addActivity records one activity entry of the call with request id requestID ("" for none) and
// mirrors it as an Event; a retry of a recorded call records nothing again.
func (s *Service) addActivity(ctx context.Context, task *tatarav1.Task, typ tatarav1.ActivityType, action, text, requestID string) *Error {
	now := metav1.Now()
	added := false
	t, err := s.updateStatus(ctx, task, func(t *tatarav1.Task) (bool, *Error) {
		added = t.Status.AddRequestActivity(now, typ, text, requestID)
		return added, nil
	})
	if err != nil {
		return err
	}
	if added {
		s.event(t, string(typ), action, text)
	}
	return nil
}
