package taskops

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// CancelSubtask sets spec.cancel on the caller's subtask name, with reason, and records it in the
// caller's activity log and as an Event. It answers ResultRecorded, or ResultIdempotent for a
// subtask already cancelled. A review is Forbidden (the Task that asked for it may not cancel it;
// a person may), a subtask that already finished a Conflict.
func (s *Service) CancelSubtask(ctx context.Context, caller *tatarav1.Task, name, reason string) (string, *Error) {
	// The cancel lands on the subtask, not the caller: check the caller first, as it is now.
	if err := s.recheckCaller(ctx, caller); err != nil {
		return "", err
	}
	result := ResultRecorded
	var oerr *Error
	var sub *tatarav1.Task
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		sub, oerr = s.subtask(ctx, caller, name, s.opts.APIReader)
		if oerr != nil {
			return nil
		}
		switch {
		case isReview(sub.Spec.Kind):
			oerr = errorf(Forbidden, "subtask %q is a review that %q asked for, which may not cancel it (a person may)", sub.Name, caller.Name)
			return nil
		case sub.Spec.Cancel != nil:
			result = ResultIdempotent
			return nil
		case sub.Status.Phase.Terminal():
			oerr = errorf(Conflict, "subtask %q already finished with phase %s", sub.Name, sub.Status.Phase)
			return nil
		}
		// A patch, not an Update: an Update would drop spec fields this build does not know, which
		// a newer CRD (left by a rollback) may hold.
		orig := sub.DeepCopy()
		sub.Spec.Cancel = &tatarav1.TaskCancel{Reason: reason}
		return s.opts.Client.Patch(ctx, sub, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return "", errorf(Internal, "failed to cancel subtask %q: %v", name, err)
	}
	if oerr != nil {
		return "", oerr
	}
	if result == ResultRecorded {
		s.event(sub, "CancelRequested", ActionSubtaskCancel, fmt.Sprintf("cancelled by %s: %s", caller.Name, reason))
		if err := s.addActivity(ctx, caller, tatarav1.ActivitySubtaskCancelled, ActionSubtaskCancel,
			fmt.Sprintf("%s: %s", sub.Name, reason), ""); err != nil {
			return "", err
		}
	}
	return result, nil
}
