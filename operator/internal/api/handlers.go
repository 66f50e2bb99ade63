package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
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
	Conditions    []metav1.Condition       `json:"conditions,omitempty"`
	CreatedAt     metav1.Time              `json:"createdAt"`
}

func viewOf(t *tatarav1.Task) taskView {
	return taskView{
		Name: t.Name, Kind: t.Spec.Kind, Project: t.Spec.ProjectRef.Name, Repo: t.Spec.Repo,
		Directive: t.Spec.Directive, Parent: t.Spec.Parent, Phase: t.Status.Phase, PodName: t.Status.PodName,
		Outcome: t.Status.Outcome, ChangeSummary: t.Status.ChangeSummary, Cancelled: t.Spec.Cancel != nil,
		Activity: t.Status.Activity, Conditions: t.Status.Conditions, CreatedAt: t.CreationTimestamp,
	}
}

type recorded struct {
	Result string `json:"result"`
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
			v.Activity = nil // lists stay small; task_get has the log
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

// updateStatus re-reads the Task from the API server, applies mutate and writes the status,
// retrying on conflicts. mutate returns false when nothing changed (no write).
func (s *Server) updateStatus(ctx context.Context, task *tatarav1.Task, mutate func(*tatarav1.Task) (bool, *apiError)) (*tatarav1.Task, *apiError) {
	var aerr *apiError
	var latest tatarav1.Task
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		aerr = nil
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(task), &latest); err != nil {
			return err
		}
		changed, merr := mutate(&latest)
		if merr != nil {
			aerr = merr
			return nil
		}
		if !changed {
			return nil
		}
		return s.opts.Client.Status().Update(ctx, &latest)
	})
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to update status of task %q: %v", task.Name, err)
	}
	return &latest, aerr
}

// addActivity records one activity entry and mirrors it as an Event.
func (s *Server) addActivity(ctx context.Context, task *tatarav1.Task, typ tatarav1.ActivityType, action, text string) *apiError {
	now := metav1.Now()
	t, err := s.updateStatus(ctx, task, func(t *tatarav1.Task) (bool, *apiError) {
		t.Status.AddActivity(now, typ, text)
		return true, nil
	})
	if err != nil {
		return err
	}
	s.event(t, string(typ), action, text)
	return nil
}

func (s *Server) taskNote(ctx context.Context, c *call) (int, any, *apiError) {
	var req noteRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.addActivity(ctx, c.task, tatarav1.ActivityNote, ToolTaskNote, req.Text); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) comment(ctx context.Context, c *call) (int, any, *apiError) {
	var req commentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.addActivity(ctx, c.task, tatarav1.ActivityComment, ToolComment, req.Body); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) commentOnIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req issueCommentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.checkRepo(ctx, c.task, req.Repo); err != nil {
		return 0, nil, err
	}
	repo := req.Repo
	if repo == "" {
		repo = c.task.Spec.Repo
	}
	text := fmt.Sprintf("issue %s#%d: %s", repo, *req.Issue, req.Body)
	if err := s.addActivity(ctx, c.task, tatarav1.ActivityIssueComment, ToolCommentOnIssue, text); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) proposeIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req proposalRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.checkRepo(ctx, c.task, req.Repo); err != nil {
		return 0, nil, err
	}
	now := metav1.Now()
	t, err := s.updateStatus(ctx, c.task, func(t *tatarav1.Task) (bool, *apiError) {
		if len(t.Status.Proposals) >= tatarav1.MaxProposals {
			return false, errorf(http.StatusConflict, "the task already has the maximum of %d proposals", tatarav1.MaxProposals)
		}
		t.Status.Proposals = append(t.Status.Proposals, tatarav1.Proposal{Title: req.Title, Body: req.Body, Repo: req.Repo, CreatedAt: now})
		t.Status.AddActivity(now, tatarav1.ActivityProposal, req.Title)
		return true, nil
	})
	if err != nil {
		return 0, nil, err
	}
	s.event(t, string(tatarav1.ActivityProposal), ToolProposeIssue, req.Title)
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
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

func (s *Server) intentHandler(tool string) handler {
	return func(ctx context.Context, c *call) (int, any, *apiError) {
		req := newIntentRequest(tool)
		if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, req); err != nil {
			return 0, nil, err
		}
		body, err := canonical(req)
		if err != nil {
			return 0, nil, errorf(http.StatusInternalServerError, "%v", err)
		}
		now := metav1.NewTime(time.Now())
		var result string
		t, aerr := s.updateStatus(ctx, c.task, func(t *tatarav1.Task) (bool, *apiError) {
			var ierr *apiError
			result, ierr = applyIntent(&t.Status, tool, req, body, now)
			return result == resultRecorded, ierr
		})
		if result != "" && s.opts.Metrics != nil {
			s.opts.Metrics.IntentsRecorded.WithLabelValues(tool, result).Inc()
		}
		if aerr != nil {
			return 0, nil, aerr
		}
		if result == resultRecorded {
			s.event(t, "Intent", tool, fmt.Sprintf("%s%s: %s", tool, valueSuffix(req.value()), req.summary()))
		}
		return http.StatusOK, map[string]any{"result": result, "outcome": t.Status.Outcome, "changeSummary": t.Status.ChangeSummary}, nil
	}
}
