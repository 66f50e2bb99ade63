package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// taskView is the JSON shape of a Task in responses.
type taskView struct {
	Name          string                   `json:"name"`
	Kind          tatarav1.TaskKind        `json:"kind"`
	Project       string                   `json:"project"`
	Repo          string                   `json:"repo,omitempty"`
	Directive     string                   `json:"directive"`
	Parent        string                   `json:"parent,omitempty"`
	Phase         tatarav1.TaskPhase       `json:"phase,omitempty"`
	PodName       string                   `json:"podName,omitempty"`
	Outcome       *tatarav1.TaskOutcome    `json:"outcome,omitempty"`
	ChangeSummary string                   `json:"changeSummary,omitempty"`
	Cancelled     bool                     `json:"cancelled,omitempty"`
	Activity      []tatarav1.ActivityEntry `json:"activity,omitempty"`
	Notes         []tatarav1.ActivityEntry `json:"notes,omitempty"`
	NotesDropped  int64                    `json:"notesDropped,omitempty"`
	Conditions    []metav1.Condition       `json:"conditions,omitempty"`
	CreatedAt     metav1.Time              `json:"createdAt"`
}

func viewOf(t *tatarav1.Task) taskView {
	return taskView{
		Name: t.Name, Kind: t.Spec.Kind, Project: t.Spec.ProjectRef.Name, Repo: t.Spec.Repo,
		Directive: t.Spec.Directive, Parent: t.Spec.Parent, Phase: t.Status.Phase, PodName: t.Status.PodName,
		Outcome: t.Status.Outcome, ChangeSummary: t.Status.ChangeSummary, Cancelled: t.Spec.Cancel != nil,
		Activity: t.Status.Activity, Notes: t.Status.Notes, NotesDropped: t.Status.NotesDropped, Conditions: t.Status.Conditions, CreatedAt: t.CreationTimestamp,
	}
}

func (s *Server) taskGet(_ context.Context, c *call) (int, any, *apiError) {
	return http.StatusOK, viewOf(c.task), nil
}

func (s *Server) taskList(ctx context.Context, c *call) (int, any, *apiError) {
	q := c.r.URL.Query()
	kind, phase := tatarav1.TaskKind(q.Get("kind")), tatarav1.TaskPhase(q.Get("phase"))
	if kind != "" && !kind.Valid() {
		return 0, nil, errorf(http.StatusBadRequest, "query parameter \"kind\" is %q: want one of %v", kind, tatarav1.TaskKinds)
	}
	if phase != "" && !slices.Contains(tatarav1.TaskPhases, phase) {
		return 0, nil, errorf(http.StatusBadRequest, "query parameter \"phase\" is %q: want one of %v", phase, tatarav1.TaskPhases)
	}
	tasks, err := s.projectTasks(ctx, c.task)
	if err != nil {
		return 0, nil, err
	}
	out := []taskView{}
	for i := range tasks {
		t := &tasks[i]
		if (kind == "" || t.Spec.Kind == kind) && (phase == "" || t.Status.Phase == phase) {
			v := viewOf(t)
			v.Activity, v.Notes = nil, nil // lists stay small; task_get has the logs
			out = append(out, v)
		}
	}
	return http.StatusOK, map[string]any{"tasks": out}, nil
}

func (s *Server) projectTasks(ctx context.Context, task *tatarav1.Task) ([]tatarav1.Task, *apiError) {
	var list tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &list, client.InNamespace(task.Namespace),
		client.MatchingFields{index.TaskProject: task.Spec.ProjectRef.Name}); err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to list tasks of project %q: %v", task.Spec.ProjectRef.Name, err)
	}
	slices.SortFunc(list.Items, func(a, b tatarav1.Task) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

func (s *Server) project(ctx context.Context, task *tatarav1.Task) (*tatarav1.Project, *apiError) {
	var p tatarav1.Project
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.ProjectRef.Name}
	if err := s.opts.Client.Get(ctx, key, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusNotFound, "project %q not found", key.Name)
		}
		return nil, errorf(http.StatusInternalServerError, "failed to get project %q: %v", key.Name, err)
	}
	return &p, nil
}

func (s *Server) projectGet(ctx context.Context, c *call) (int, any, *apiError) {
	p, err := s.project(ctx, c.task)
	if err != nil {
		return 0, nil, err
	}
	repos := p.Spec.Repos
	if repos == nil {
		repos = []tatarav1.ProjectRepo{}
	}
	return http.StatusOK, map[string]any{"name": p.Name, "repos": repos}, nil
}

func (s *Server) repoList(ctx context.Context, c *call) (int, any, *apiError) {
	p, err := s.project(ctx, c.task)
	if err != nil {
		return 0, nil, err
	}
	repos := p.Spec.Repos
	if repos == nil {
		repos = []tatarav1.ProjectRepo{}
	}
	return http.StatusOK, map[string]any{"repos": repos}, nil
}

// checkRepo validates an optional repo field against the Project.
func (s *Server) checkRepo(ctx context.Context, task *tatarav1.Task, repo string) *apiError {
	if repo == "" {
		return nil
	}
	p, err := s.project(ctx, task)
	if err != nil {
		return err
	}
	if !p.HasRepo(repo) {
		return errorf(http.StatusBadRequest, "field \"repo\": project %q has no repo %q", p.Name, repo)
	}
	return nil
}

type proposalView struct {
	Task string `json:"task"`
	tatarav1.Proposal
}

func (s *Server) proposalList(ctx context.Context, c *call) (int, any, *apiError) {
	tasks, err := s.projectTasks(ctx, c.task)
	if err != nil {
		return 0, nil, err
	}
	out := []proposalView{}
	for _, t := range tasks {
		for _, p := range t.Status.Proposals {
			out = append(out, proposalView{Task: t.Name, Proposal: p})
		}
	}
	return http.StatusOK, map[string]any{"proposals": out}, nil
}
