package taskops

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/token"
)

// The caller checks: whether a Task's token still works. rest's authentication asks them of the
// Task its cache found for a bearer token; every write asks them again of the Task as the API
// server has it now, since the cache may lag behind the Task's end or a new token.

// MintedToken is the token in the Task's Secret, if that Secret is the one the operator minted
// for it: under the expected name, controlled by the Task (a Task deleted and recreated under the
// same name must not inherit an old Secret), holding the token whose hash the status records.
// Anything else is Unauthenticated.
func (s *Service) MintedToken(ctx context.Context, task *tatarav1.Task) (string, *Error) {
	var sec corev1.Secret
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: agent.SecretName(task.Name)}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errorf(Unauthenticated, "invalid token")
		}
		return "", errorf(Internal, "failed to get token secret of task %q: %v", task.Name, err)
	}
	tok := string(sec.Data[agent.TokenKey])
	if owner := metav1.GetControllerOf(&sec); owner == nil || owner.UID != task.UID || owner.Kind != "Task" ||
		!token.Matches(tok, task.Status.TokenHash) {
		return "", errorf(Unauthenticated, "invalid token")
	}
	return tok, nil
}

// EndedTask is the refusal (Unauthenticated) of a token whose Task was cancelled or has
// finished; nil while it runs.
func EndedTask(task *tatarav1.Task) *Error {
	if task.Spec.Cancel == nil && !task.Status.Phase.Terminal() {
		return nil
	}
	phase := task.Status.Phase
	if !phase.Terminal() {
		phase = tatarav1.PhaseCancelled
	}
	return errorf(Unauthenticated, "invalid token: task %q has ended (%s); its token no longer works", task.Name, phase)
}

// stillAuthenticated checks the caller's Task as the API server has it now against the cached
// copy authentication accepted: the cache may lag behind the Task's end or a new token, and a
// write must never land for a token that no longer works.
func stillAuthenticated(cached, latest *tatarav1.Task) *Error {
	if latest.UID != cached.UID || latest.Status.TokenHash != cached.Status.TokenHash {
		return errorf(Unauthenticated, "invalid token")
	}
	return EndedTask(latest)
}

// recheckCaller reads the caller's Task from the API server and refuses a token that stopped
// working since authentication read the cache (stillAuthenticated).
func (s *Service) recheckCaller(ctx context.Context, caller *tatarav1.Task) *Error {
	var latest tatarav1.Task
	if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(caller), &latest); err != nil {
		if apierrors.IsNotFound(err) {
			return errorf(Unauthenticated, "invalid token")
		}
		return errorf(Internal, "failed to get task %q: %v", caller.Name, err)
	}
	return stillAuthenticated(caller, &latest)
}
