package taskops

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// Subtasks lists the caller's subtasks from the cache, by name, without their activity and
// notes; never nil.
func (s *Service) Subtasks(ctx context.Context, caller *tatarav1.Task) ([]TaskView, *Error) {
	var list tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &list, client.InNamespace(caller.Namespace),
		client.MatchingFields{index.TaskParent: caller.Name}); err != nil {
		return nil, errorf(Internal, "failed to list subtasks of %q: %v", caller.Name, err)
	}
	slices.SortFunc(list.Items, func(a, b tatarav1.Task) int { return strings.Compare(a.Name, b.Name) })
	out := []TaskView{}
	for i := range list.Items {
		v := subtaskView(caller, &list.Items[i])
		v.Activity, v.Notes = nil, nil
		out = append(out, v)
	}
	return out, nil
}

// Subtask is the caller's subtask name as the caller may see it (subtaskView), from the cache.
func (s *Service) Subtask(ctx context.Context, caller *tatarav1.Task, name string) (TaskView, *Error) {
	sub, err := s.subtask(ctx, caller, name, s.opts.Client)
	if err != nil {
		return TaskView{}, err
	}
	return subtaskView(caller, sub), nil
}

// subtask gets the Task name through reader: NotFound when it does not exist, Forbidden when it is
// not the caller's child.
func (s *Service) subtask(ctx context.Context, caller *tatarav1.Task, name string, reader client.Reader) (*tatarav1.Task, *Error) {
	var sub tatarav1.Task
	if err := reader.Get(ctx, types.NamespacedName{Namespace: caller.Namespace, Name: name}, &sub); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(NotFound, "subtask %q not found", name)
		}
		return nil, errorf(Internal, "failed to get subtask %q: %v", name, err)
	}
	if sub.Spec.Parent != caller.Name {
		return nil, errorf(Forbidden, "task %q is not a subtask of %q", name, caller.Name)
	}
	return &sub, nil
}
