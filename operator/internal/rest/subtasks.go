package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// lockProject serialises subtask_create's count-then-create per Project: inside this process
// first (requests on one replica queue here, not on the API server), then across the replicas
// that serve the REST API, when Options.LockNamespace is set. Without the shared lock, requests
// reaching different replicas could each pass a limit with one slot left.
func (s *Server) lockProject(ctx context.Context, key string) (unlock func(), err error) {
	unlockLocal, err := s.projectLocks.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	if s.sharedLocks == nil {
		return unlockLocal, nil
	}
	unlockShared, err := s.sharedLocks.lock(ctx, key)
	if err != nil {
		unlockLocal()
		return nil, err
	}
	return func() { unlockShared(); unlockLocal() }, nil
}

// keyedLock is one mutex per key; waiting for it gives up when the request's context ends.
// Keys are never removed: there is one per Project that ever had a subtask created.
type keyedLock struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func (k *keyedLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]chan struct{}{}
	}
	ch, ok := k.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		k.locks[key] = ch
	}
	k.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// subtaskCreate creates a child Task. Before anything is created it checks, in order: the
// parent kind's row of subtaskPolicy (403), MaxSubtaskDepth, MaxChildrenPerTask and the
// Project's spec.maxActiveTasks (429 each). The limits are checked twice: first from the cache
// (two indexed reads, no copies), so a call that is already over a limit costs no API request
// and no lock however many Tasks the namespace holds; then, under the Project's lock, from the
// API server, reading only the parent's children and the Project's active Tasks (field selectors
// on the CRD's selectable fields), never the namespace's finished Tasks.
func (s *Server) subtaskCreate(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCreateRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if aerr := checkSubtaskKind(c.task.Spec.Kind, tatarav1.TaskKind(req.Kind)); aerr != nil {
		return 0, nil, aerr
	}
	p, aerr := s.project(ctx, c.task)
	if aerr != nil {
		return 0, nil, aerr
	}
	if !p.HasRepo(req.Repo) {
		return 0, nil, errorf(http.StatusBadRequest, "field \"repo\": project %q has no repo %q", p.Name, req.Repo)
	}
	ancestors, depth, aerr := s.ancestors(ctx, c.task)
	if aerr != nil {
		return 0, nil, aerr
	}
	annotations := requestAnnotation(c.requestID)
	if isReview(tatarav1.TaskKind(req.Kind)) {
		asker := personCreated(c.task, ancestors)
		if asker == nil {
			return 0, nil, errorf(http.StatusConflict, "review of %q refused: the Tasks above it end at one that is gone before a Task "+
				"that no agent created, and only such a Task's directive may tell a reviewer what was asked", c.task.Name)
		}
		notes, aerr := reviewRequest(c.task, asker, &req)
		if aerr != nil {
			return 0, nil, aerr
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ImplementerNotesAnnotation] = notes
	}
	if done, aerr := s.checkSubtaskLimitsCached(ctx, c, depth, p.Spec.MaxActiveTasks); done != nil || aerr != nil {
		return http.StatusCreated, done, aerr
	}
	// Count, then create, under the Project's lock, so two concurrent requests cannot both
	// pass a limit with one slot left. It is held until the handler returns, so the parent's
	// activity entry is written under it too and concurrent creations do not race on it.
	unlock, err := s.lockProject(ctx, c.task.Namespace+"/"+c.task.Spec.ProjectRef.Name)
	if err != nil {
		return 0, nil, errorf(http.StatusServiceUnavailable, "subtask of %q not created: %v", c.task.Name, err)
	}
	defer unlock()
	// The counts come from the API server, not the cache: the cache may not hold the subtask
	// the previous request created yet, and would let this one pass a limit.
	if aerr := s.recheckCaller(ctx, c); aerr != nil {
		return 0, nil, aerr
	}
	var children, active tatarav1.TaskList
	if err := s.opts.APIReader.List(ctx, &children, client.InNamespace(c.task.Namespace), childrenOf(c.task.Name)); err != nil {
		return 0, nil, errorf(http.StatusInternalServerError, "failed to list the subtasks of %q: %v", c.task.Name, err)
	}
	if done := retried(c, children.Items); done != nil {
		return http.StatusCreated, subtaskView(c.task, done), nil
	}
	if err := s.opts.APIReader.List(ctx, &active, client.InNamespace(c.task.Namespace), activeIn(c.task.Spec.ProjectRef.Name)); err != nil {
		return 0, nil, errorf(http.StatusInternalServerError, "failed to list the active tasks of project %q: %v", c.task.Spec.ProjectRef.Name, err)
	}
	if aerr := checkSubtaskLimits(c.task, depth, len(children.Items), len(active.Items), p.Spec.MaxActiveTasks); aerr != nil {
		return 0, nil, aerr
	}
	sub := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: subtaskNamePrefix(c.task.Name),
			Namespace:    c.task.Namespace,
			Annotations:  annotations,
			// Deleting the parent deletes its subtasks; not a controller reference, the
			// parent's agent does not manage the subtask's pod.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tatarav1.GroupVersion.String(), Kind: "Task", Name: c.task.Name, UID: c.task.UID,
			}},
		},
		Spec: tatarav1.TaskSpec{
			Kind: tatarav1.TaskKind(req.Kind), ProjectRef: c.task.Spec.ProjectRef,
			Repo: req.Repo, Ref: req.Ref, Directive: req.Directive, Parent: c.task.Name,
		},
	}
	if err := s.opts.Client.Create(ctx, sub); err != nil {
		if apierrors.IsInvalid(err) {
			return 0, nil, errorf(http.StatusBadRequest, "invalid subtask: %v", err)
		}
		return 0, nil, errorf(http.StatusInternalServerError, "failed to create subtask of %q: %v", c.task.Name, err)
	}
	if err := s.addActivity(ctx, c.task, tatarav1.ActivitySubtaskCreated, ToolSubtaskCreate,
		fmt.Sprintf("%s (%s, repo %s)", sub.Name, sub.Spec.Kind, sub.Spec.Repo), ""); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, subtaskView(c.task, sub), nil
}

// ancestors returns the Tasks above t, nearest first, read from the cache (spec.parent is
// immutable), and t's depth: 0 for a root Task, one more for each spec.parent above it, counting
// a parent that is gone (the walk ends there: its children are deleted with it through their
// owner references). The walk stops after MaxSubtaskDepth steps: deeper makes no difference to any
// decision, and a cycle written by hand cannot loop.
func (s *Server) ancestors(ctx context.Context, t *tatarav1.Task) ([]tatarav1.Task, int, *apiError) {
	var chain []tatarav1.Task
	depth := 0
	for name := t.Spec.Parent; name != "" && depth < MaxSubtaskDepth; depth++ {
		var a tatarav1.Task
		if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, &a); err != nil {
			if apierrors.IsNotFound(err) {
				return chain, depth + 1, nil
			}
			return nil, 0, errorf(http.StatusInternalServerError, "failed to get task %q above %q: %v", name, t.Name, err)
		}
		chain = append(chain, a)
		name = a.Spec.Parent
	}
	return chain, depth, nil
}

// personCreated returns the nearest of t and its ancestors (nearest first) that no agent created:
// the first without spec.parent, which only subtask_create sets. nil when the chain ends first.
func personCreated(t *tatarav1.Task, ancestors []tatarav1.Task) *tatarav1.Task {
	if t.Spec.Parent == "" {
		return t
	}
	for i := range ancestors {
		if ancestors[i].Spec.Parent == "" {
			return &ancestors[i]
		}
	}
	return nil
}

// childrenOf selects the Tasks whose spec.parent is parent (a selectable field of the CRD).
func childrenOf(parent string) client.ListOption {
	return client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(index.TaskParent, parent)}
}

// activeIn selects the Tasks of project whose phase is not terminal (selectable fields of the
// CRD; a Task without a phase yet is active).
func activeIn(project string) client.ListOption {
	selectors := []fields.Selector{fields.OneTermEqualSelector(index.TaskProject, project)}
	for _, phase := range []tatarav1.TaskPhase{tatarav1.PhaseSucceeded, tatarav1.PhaseFailed, tatarav1.PhaseCancelled} {
		selectors = append(selectors, fields.OneTermNotEqualSelector(index.TaskPhase, string(phase)))
	}
	return client.MatchingFieldsSelector{Selector: fields.AndSelectors(selectors...)}
}

// retried returns the subtask a call with the same request id already created, if any: a retry
// gets that subtask, nothing new.
func retried(c *call, children []tatarav1.Task) *tatarav1.Task {
	if c.requestID == "" {
		return nil
	}
	i := slices.IndexFunc(children, func(t tatarav1.Task) bool {
		return t.Annotations[SubtaskRequestAnnotation] == c.requestID &&
			slices.ContainsFunc(t.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == c.task.UID })
	})
	if i < 0 {
		return nil
	}
	return &children[i]
}

// checkSubtaskLimitsCached is the first check of the limits, from the cache's indexes: it refuses
// a call that is already over one, and answers a retry whose subtask the cache already holds. The
// cache may lag behind the API server, which only makes it undercount: what it refuses, the API
// server would refuse too. The objects are the cache's own (no copies), so they are only read.
func (s *Server) checkSubtaskLimitsCached(ctx context.Context, c *call, depth int, maxActiveTasks int32) (any, *apiError) {
	var children, project tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &children, client.InNamespace(c.task.Namespace),
		client.MatchingFields{index.TaskParent: c.task.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to list the subtasks of %q: %v", c.task.Name, err)
	}
	if done := retried(c, children.Items); done != nil {
		return subtaskView(c.task, done), nil
	}
	if err := s.opts.Client.List(ctx, &project, client.InNamespace(c.task.Namespace),
		client.MatchingFields{index.TaskProject: c.task.Spec.ProjectRef.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to list the tasks of project %q: %v", c.task.Spec.ProjectRef.Name, err)
	}
	active := 0
	for i := range project.Items {
		if !project.Items[i].Status.Phase.Terminal() {
			active++
		}
	}
	return nil, checkSubtaskLimits(c.task, depth, len(children.Items), active, maxActiveTasks)
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
		v := subtaskView(c.task, &list.Items[i])
		v.Activity, v.Notes = nil, nil
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
	return http.StatusOK, subtaskView(c.task, sub), nil
}

// subtaskView is what parent sees of its subtask sub. A review shows neither its activity, notes
// nor outcome until it ends: the Task that asked for it (whose branch, or whose delegate's, it
// reviews) must not watch it as it is written and react to it (ask for another, steer the next
// one) before the verdict stands.
func subtaskView(parent, sub *tatarav1.Task) taskView {
	v := viewOf(sub)
	if isReview(sub.Spec.Kind) && sub.Spec.Parent == parent.Name && !sub.Status.Phase.Terminal() {
		v.Activity, v.Notes, v.Outcome = nil, nil, nil
	}
	return v
}

func (s *Server) subtaskCancel(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCancelRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	// The cancel lands on the subtask, not the caller: check the caller first, as it is now.
	if aerr := s.recheckCaller(ctx, c); aerr != nil {
		return 0, nil, aerr
	}
	result := resultRecorded
	var aerr *apiError
	var sub *tatarav1.Task
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		sub, aerr = s.subtask(ctx, c, s.opts.APIReader)
		if aerr != nil {
			return nil
		}
		switch {
		case isReview(sub.Spec.Kind):
			aerr = errorf(http.StatusForbidden, "subtask %q is a review that %q asked for, which may not cancel it (a person may)", sub.Name, c.task.Name)
			return nil
		case sub.Spec.Cancel != nil:
			result = resultIdempotent
			return nil
		case sub.Status.Phase.Terminal():
			aerr = errorf(http.StatusConflict, "subtask %q already finished with phase %s", sub.Name, sub.Status.Phase)
			return nil
		}
		// A patch, not an Update: an Update would drop spec fields this build does not know, which
		// a newer CRD (left by a rollback) may hold.
		orig := sub.DeepCopy()
		sub.Spec.Cancel = &tatarav1.TaskCancel{Reason: req.Reason}
		return s.opts.Client.Patch(ctx, sub, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
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
			fmt.Sprintf("%s: %s", sub.Name, req.Reason), ""); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, recorded{Result: result}, nil
}
