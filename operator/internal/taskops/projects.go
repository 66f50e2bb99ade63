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

// Project reads: the caller's Project, its repos and its Tasks, from the cache.

// Repos reads the caller's Project and answers its name and repos, never nil (project_get and
// repo_list).
func (s *Service) Repos(ctx context.Context, caller *tatarav1.Task) (project string, repos []tatarav1.ProjectRepo, err *Error) {
	p, err := s.project(ctx, caller)
	if err != nil {
		return "", nil, err
	}
	repos = p.Spec.Repos
	if repos == nil {
		repos = []tatarav1.ProjectRepo{}
	}
	return p.Name, repos, nil
}

// Tasks lists the Tasks of the caller's Project, by name, of kind and in phase where those are
// not empty, without their activity and notes (lists stay small; task_get has the logs); never
// nil.
func (s *Service) Tasks(ctx context.Context, caller *tatarav1.Task, kind tatarav1.TaskKind, phase tatarav1.TaskPhase) ([]TaskView, *Error) {
	tasks, err := s.projectTasks(ctx, caller)
	if err != nil {
		return nil, err
	}
	out := []TaskView{}
	for i := range tasks {
		t := &tasks[i]
		if (kind == "" || t.Spec.Kind == kind) && (phase == "" || t.Status.Phase == phase) {
			v := ViewOf(t)
			v.Activity, v.Notes = nil, nil
			out = append(out, v)
		}
	}
	return out, nil
}

func (s *Service) projectTasks(ctx context.Context, task *tatarav1.Task) ([]tatarav1.Task, *Error) {
	var list tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &list, client.InNamespace(task.Namespace),
		client.MatchingFields{index.TaskProject: task.Spec.ProjectRef.Name}); err != nil {
		return nil, errorf(Internal, "failed to list tasks of project %q: %v", task.Spec.ProjectRef.Name, err)
	}
	slices.SortFunc(list.Items, func(a, b tatarav1.Task) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

func (s *Service) project(ctx context.Context, task *tatarav1.Task) (*tatarav1.Project, *Error) {
	var p tatarav1.Project
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.ProjectRef.Name}
	if err := s.opts.Client.Get(ctx, key, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(NotFound, "project %q not found", key.Name)
		}
		return nil, errorf(Internal, "failed to get project %q: %v", key.Name, err)
	}
	return &p, nil
}

// checkRepo validates an optional repo field against the Project.
func (s *Service) checkRepo(ctx context.Context, task *tatarav1.Task, repo string) *Error {
	if repo == "" {
		return nil
	}
	p, err := s.project(ctx, task)
	if err != nil {
		return err
	}
	if !p.HasRepo(repo) {
		return errorf(Invalid, "field \"repo\": project %q has no repo %q", p.Name, repo)
	}
	return nil
}
