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
// Project's spec.maxActiveTasks (429 each).
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
	annotations := requestAnnotation(c.requestID)
	if reviewsParent(c.task, tatarav1.TaskKind(req.Kind)) {
		notes, aerr := reviewOfParent(c.task, &req)
		if aerr != nil {
			return 0, nil, aerr
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ImplementerNotesAnnotation] = notes
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
	var tasks tatarav1.TaskList
	if err := s.opts.APIReader.List(ctx, &tasks, client.InNamespace(c.task.Namespace)); err != nil {
		return 0, nil, errorf(http.StatusInternalServerError, "failed to list tasks of namespace %q: %v", c.task.Namespace, err)
	}
	// The parent as the API server has it now: the cache authenticate read may lag behind its end.
	i := slices.IndexFunc(tasks.Items, func(t tatarav1.Task) bool { return t.UID == c.task.UID })
	if i < 0 {
		return 0, nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	if aerr := stillAuthenticated(c.task, &tasks.Items[i]); aerr != nil {
		return 0, nil, aerr
	}
	if c.requestID != "" {
		// A retry of a call that created its subtask: that subtask, nothing new.
		if j := slices.IndexFunc(tasks.Items, func(t tatarav1.Task) bool {
			return t.Annotations[SubtaskRequestAnnotation] == c.requestID &&
				slices.ContainsFunc(t.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == c.task.UID })
		}); j >= 0 {
			return http.StatusCreated, viewOf(&tasks.Items[j]), nil
		}
	}
	if aerr := checkSubtaskLimits(c.task, tasks.Items, p.Spec.MaxActiveTasks); aerr != nil {
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
