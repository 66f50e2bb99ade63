package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// Subtasks: a Task creates, lists, reads and cancels its own child Tasks.

// subtaskNamePrefix keeps generated subtask names within the 50-character Task name limit.
func subtaskNamePrefix(parent string) string {
	const maxParent = 38 // + "-sub-" + 5 random characters = 48
	if len(parent) > maxParent {
		parent = strings.TrimRight(parent[:maxParent], "-.")
	}
	return parent + "-sub-"
}

func (s *Server) subtaskCreate(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCreateRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	p, aerr := s.project(ctx, c.task)
	if aerr != nil {
		return 0, nil, aerr
	}
	if !p.HasRepo(req.Repo) {
		return 0, nil, errorf(http.StatusBadRequest, "field \"repo\": project %q has no repo %q", p.Name, req.Repo)
	}
	sub := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: subtaskNamePrefix(c.task.Name),
			Namespace:    c.task.Namespace,
			// Deleting the parent deletes its subtasks; not a controller reference, the
			// parent's agent does not manage the subtask's pod.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tatarav1.GroupVersion.String(), Kind: "Task", Name: c.task.Name, UID: c.task.UID,
			}},
		},
		Spec: tatarav1.TaskSpec{
			Kind: tatarav1.TaskKind(req.Kind), ProjectRef: c.task.Spec.ProjectRef,
			Repo: req.Repo, Directive: req.Directive, Parent: c.task.Name,
		},
	}
	if err := s.opts.Client.Create(ctx, sub); err != nil {
		if apierrors.IsInvalid(err) {
			return 0, nil, errorf(http.StatusBadRequest, "invalid subtask: %v", err)
		}
		return 0, nil, errorf(http.StatusInternalServerError, "failed to create subtask of %q: %v", c.task.Name, err)
	}
	if err := s.addActivity(ctx, c.task, tatarav1.ActivitySubtaskCreated, ToolSubtaskCreate,
		fmt.Sprintf("%s (%s, repo %s)", sub.Name, sub.Spec.Kind, sub.Spec.Repo)); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, viewOf(sub), nil
}

func (s *Server) subtaskList(ctx context.Context, c *call) (int, any, *apiError) {
	var list tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &list, client.InNamespace(c.task.Namespace),
		client.MatchingFields{index.TaskParent: c.task.Name}); err != nil {
		return 0, nil, errorf(http.StatusInternalServerError, "failed to list subtasks of %q: %v", c.task.Name, err)
	}
	slices.SortFunc(list.Items, func(a, b tatarav1.Task) int { return strings.Compare(a.Name, b.Name) })
	out := []taskView{}
	for i := range list.Items {
		v := viewOf(&list.Items[i])
		v.Activity = nil
		out = append(out, v)
	}
	return http.StatusOK, map[string]any{"subtasks": out}, nil
}

// subtask gets {subtask}: 404 when it does not exist, 403 when it is not the caller's child.
func (s *Server) subtask(ctx context.Context, c *call, reader client.Reader) (*tatarav1.Task, *apiError) {
	name := c.r.PathValue("subtask")
	var sub tatarav1.Task
	if err := reader.Get(ctx, types.NamespacedName{Namespace: c.task.Namespace, Name: name}, &sub); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusNotFound, "subtask %q not found", name)
		}
		return nil, errorf(http.StatusInternalServerError, "failed to get subtask %q: %v", name, err)
	}
	if sub.Spec.Parent != c.task.Name {
		return nil, errorf(http.StatusForbidden, "task %q is not a subtask of %q", name, c.task.Name)
	}
	return &sub, nil
}

func (s *Server) subtaskGet(ctx context.Context, c *call) (int, any, *apiError) {
	sub, err := s.subtask(ctx, c, s.opts.Client)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewOf(sub), nil
}

func (s *Server) subtaskCancel(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCancelRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	result := resultRecorded
	var aerr *apiError
	var sub *tatarav1.Task
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sub, aerr = s.subtask(ctx, c, s.opts.APIReader)
		if aerr != nil {
			return nil
		}
		switch {
		case sub.Spec.Cancel != nil:
			result = resultIdempotent
			return nil
		case sub.Status.Phase.Terminal():
			aerr = errorf(http.StatusConflict, "subtask %q already finished with phase %s", sub.Name, sub.Status.Phase)
			return nil
		}
		sub.Spec.Cancel = &tatarav1.TaskCancel{Reason: req.Reason}
		return s.opts.Client.Update(ctx, sub)
	})
	if err != nil {
		return 0, nil, errorf(http.StatusInternalServerError, "failed to cancel subtask %q: %v", c.r.PathValue("subtask"), err)
	}
	if aerr != nil {
		return 0, nil, aerr
	}
	if result == resultRecorded {
		s.event(sub, "CancelRequested", ToolSubtaskCancel, fmt.Sprintf("cancelled by %s: %s", c.task.Name, req.Reason))
		if err := s.addActivity(ctx, c.task, tatarav1.ActivitySubtaskCancelled, ToolSubtaskCancel,
			fmt.Sprintf("%s: %s", sub.Name, req.Reason)); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, recorded{Result: result}, nil
}
