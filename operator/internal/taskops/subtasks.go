package taskops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// Subtasks: a Task creates, lists, reads and cancels its own child Tasks.

// SubtaskRequestAnnotation holds the request id (the Idempotency-Key) of the subtask_create call
// that created a subtask: a retry of the call finds the subtask by it and creates nothing.
const SubtaskRequestAnnotation = "tatara.dev/request-id"

// SubtaskSpec is the subtask a Task asks for: the child's kind, its repo (one of the Project's),
// its directive and, optionally, its spec.ref (which the CRD validates).
type SubtaskSpec struct {
	Kind      tatarav1.TaskKind
	Repo      string
	Directive string
	Ref       string
}

// requestAnnotation is the annotations of a subtask created by the call with request id id.
func requestAnnotation(id string) map[string]string {
	if id == "" {
		return nil
	}
	return map[string]string{SubtaskRequestAnnotation: id}
}

// subtaskNamePrefix keeps generated subtask names within the 50-character Task name limit.
func subtaskNamePrefix(parent string) string {
	const maxParent = 38 // + "-sub-" + 5 random characters = 48
	if len(parent) > maxParent {
		parent = strings.TrimRight(parent[:maxParent], "-.")
	}
	return parent + "-sub-"
}

// CreateSubtask creates a child Task of caller. Before anything is created it checks, in order:
// the parent kind's row of subtaskPolicy (Forbidden), MaxSubtaskDepth, MaxChildrenPerTask and the
// Project's spec.maxActiveTasks (LimitReached each). The limits are checked twice: first from the
// cache (two indexed reads, no copies), so a call that is already over a limit costs no API
// request and no lock however many Tasks the namespace holds; then, under the Project's lock, from
// the API server, reading only the parent's children and the Project's active Tasks (field
// selectors on the CRD's selectable fields), never the namespace's finished Tasks. A retry of the
// call (the same requestID) answers the subtask the first call created.
func (s *Service) CreateSubtask(ctx context.Context, caller *tatarav1.Task, spec SubtaskSpec, requestID string) (TaskView, *Error) {
	if err := checkSubtaskKind(caller.Spec.Kind, spec.Kind); err != nil {
		return TaskView{}, err
	}
	p, err := s.project(ctx, caller)
	if err != nil {
		return TaskView{}, err
	}
	if !p.HasRepo(spec.Repo) {
		return TaskView{}, errorf(Invalid, "field \"repo\": project %q has no repo %q", p.Name, spec.Repo)
	}
	ancestors, depth, err := s.ancestors(ctx, caller)
	if err != nil {
		return TaskView{}, err
	}
	annotations := requestAnnotation(requestID)
	if isReview(spec.Kind) {
		asker := personCreated(caller, ancestors)
		if asker == nil {
			return TaskView{}, errorf(Conflict, "review of %q refused: the Tasks above it end at one that is gone before a Task "+
				"that no agent created, and only such a Task's directive may tell a reviewer what was asked", caller.Name)
		}
		notes, err := reviewRequest(caller, asker, &spec)
		if err != nil {
			return TaskView{}, err
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ImplementerNotesAnnotation] = notes
	}
	if done, err := s.checkSubtaskLimitsCached(ctx, caller, requestID, depth, p.Spec.MaxActiveTasks); done != nil || err != nil {
		if err != nil {
			return TaskView{}, err
		}
		return *done, nil
	}
	// Count, then create, under the Project's lock, so two concurrent requests cannot both
	// pass a limit with one slot left. It is held until the call returns, so the parent's
	// activity entry is written under it too and concurrent creations do not race on it.
	unlock, lerr := s.LockProject(ctx, caller.Namespace, caller.Spec.ProjectRef.Name)
	if lerr != nil {
		return TaskView{}, errorf(Unavailable, "subtask of %q not created: %v", caller.Name, lerr)
	}
	defer unlock()
	// The counts come from the API server, not the cache: the cache may not hold the subtask
	// the previous request created yet, and would let this one pass a limit.
	if err := s.recheckCaller(ctx, caller); err != nil {
		return TaskView{}, err
	}
	var children, active tatarav1.TaskList
	if err := s.opts.APIReader.List(ctx, &children, client.InNamespace(caller.Namespace), childrenOf(caller.Name)); err != nil {
		return TaskView{}, errorf(Internal, "failed to list the subtasks of %q: %v", caller.Name, err)
	}
	if done := retried(caller, requestID, children.Items); done != nil {
		return subtaskView(caller, done), nil
	}
	if err := s.opts.APIReader.List(ctx, &active, client.InNamespace(caller.Namespace), activeIn(caller.Spec.ProjectRef.Name)); err != nil {
		return TaskView{}, errorf(Internal, "failed to list the active tasks of project %q: %v", caller.Spec.ProjectRef.Name, err)
	}
	if err := checkSubtaskLimits(caller, depth, len(children.Items), len(active.Items), p.Spec.MaxActiveTasks); err != nil {
		return TaskView{}, err
	}
	sub := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: subtaskNamePrefix(caller.Name),
			Namespace:    caller.Namespace,
			Annotations:  annotations,
			// Deleting the parent deletes its subtasks; not a controller reference, the
			// parent's agent does not manage the subtask's pod.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tatarav1.GroupVersion.String(), Kind: "Task", Name: caller.Name, UID: caller.UID,
			}},
		},
		Spec: tatarav1.TaskSpec{
			Kind: spec.Kind, ProjectRef: caller.Spec.ProjectRef,
			Repo: spec.Repo, Ref: spec.Ref, Directive: spec.Directive, Parent: caller.Name,
		},
	}
	if err := s.opts.Client.Create(ctx, sub); err != nil {
		if apierrors.IsInvalid(err) {
			return TaskView{}, errorf(Invalid, "invalid subtask: %v", err)
		}
		return TaskView{}, errorf(Internal, "failed to create subtask of %q: %v", caller.Name, err)
	}
	if err := s.addActivity(ctx, caller, tatarav1.ActivitySubtaskCreated, ActionSubtaskCreate,
		fmt.Sprintf("%s (%s, repo %s)", sub.Name, sub.Spec.Kind, sub.Spec.Repo), ""); err != nil {
		return TaskView{}, err
	}
	return subtaskView(caller, sub), nil
}

// ancestors returns the Tasks above t, nearest first, read from the cache (spec.parent is
// immutable), and t's depth: 0 for a root Task, one more for each spec.parent above it, counting
// a parent that is gone (the walk ends there: its children are deleted with it through their
// owner references). The walk stops after MaxSubtaskDepth steps: deeper makes no difference to any
// decision, and a cycle written by hand cannot loop.
func (s *Service) ancestors(ctx context.Context, t *tatarav1.Task) ([]tatarav1.Task, int, *Error) {
	var chain []tatarav1.Task
	depth := 0
	for name := t.Spec.Parent; name != "" && depth < MaxSubtaskDepth; depth++ {
		var a tatarav1.Task
		if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, &a); err != nil {
			if apierrors.IsNotFound(err) {
				return chain, depth + 1, nil
			}
			return nil, 0, errorf(Internal, "failed to get task %q above %q: %v", name, t.Name, err)
		}
		chain = append(chain, a)
		name = a.Spec.Parent
	}
	return chain, depth, nil
}

// personCreated returns the nearest of t and its ancestors (nearest first) that no agent created:
// the first without spec.parent, which only subtask creation sets. nil when the chain ends first.
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

// retried returns the subtask a call of parent with the same request id already created, if any:
// a retry gets that subtask, nothing new.
func retried(parent *tatarav1.Task, requestID string, children []tatarav1.Task) *tatarav1.Task {
	if requestID == "" {
		return nil
	}
	i := slices.IndexFunc(children, func(t tatarav1.Task) bool {
		return t.Annotations[SubtaskRequestAnnotation] == requestID &&
			slices.ContainsFunc(t.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == parent.UID })
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
func (s *Service) checkSubtaskLimitsCached(ctx context.Context, caller *tatarav1.Task, requestID string, depth int, maxActiveTasks int32) (*TaskView, *Error) {
	var children, project tatarav1.TaskList
	if err := s.opts.Client.List(ctx, &children, client.InNamespace(caller.Namespace),
		client.MatchingFields{index.TaskParent: caller.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errorf(Internal, "failed to list the subtasks of %q: %v", caller.Name, err)
	}
	if done := retried(caller, requestID, children.Items); done != nil {
		v := subtaskView(caller, done)
		return &v, nil
	}
	if err := s.opts.Client.List(ctx, &project, client.InNamespace(caller.Namespace),
		client.MatchingFields{index.TaskProject: caller.Spec.ProjectRef.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errorf(Internal, "failed to list the tasks of project %q: %v", caller.Spec.ProjectRef.Name, err)
	}
	active := 0
	for i := range project.Items {
		if !project.Items[i].Status.Phase.Terminal() {
			active++
		}
	}
	return nil, checkSubtaskLimits(caller, depth, len(children.Items), active, maxActiveTasks)
}
