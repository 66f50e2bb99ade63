// Package controller reconciles Tasks into their token Secret and agent pod, and mirrors the
// pod's state into the Task status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/metrics"
	"tatara.dev/operator/internal/token"
)

// The runtime ConfigMaps rendered by the cli and wrapper charts; key ImageKey names the image.
const (
	CLIRuntimeConfigMap     = "tatara-cli-runtime"
	WrapperRuntimeConfigMap = "tatara-wrapper-runtime"
	ImageKey                = "image"
)

// conflictRequeue retries soon after a status write lost a race with the REST API.
const conflictRequeue = 100 * time.Millisecond

// Config is the operator-wide configuration of the reconciler.
type Config struct {
	// RuntimeNamespace holds the runtime ConfigMaps (the operator's own namespace).
	RuntimeNamespace string
	OperatorURL      string
	MemoryURL        string
	ChatURL          string
}

// TaskReconciler reconciles a Task object.
type TaskReconciler struct {
	client.Client
	// APIReader reads around the cache, to tell "not created yet" from "not in the cache yet".
	APIReader client.Reader
	Recorder  events.EventRecorder
	Metrics   *metrics.Metrics
	Config    Config
}

// +kubebuilder:rbac:groups=tatara.dev,resources=tasks,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=tatara.dev,resources=tasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tatara.dev,resources=tasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=tatara.dev,resources=projects,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings a Task's Secret and pod into existence (once) and mirrors the pod into
// the Task status. Deterministic names and AlreadyExists-tolerant creates make it idempotent
// across requeues and operator restarts.
func (r *TaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var task tatarav1.Task
	if err := r.Get(ctx, req.NamespacedName, &task); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !task.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references let the garbage collector remove pod and Secret
	}
	defer func() {
		result := "ok"
		if err != nil {
			result = "error"
		}
		if r.Metrics != nil {
			r.Metrics.TaskReconciles.WithLabelValues(result).Inc()
		}
	}()

	orig := task.DeepCopy()
	// The REST API appends to the same status; the optimistic lock turns a lost update into
	// a conflict and a requeue instead of a dropped activity entry.
	defer func() {
		task.Status.ObservedGeneration = task.Generation
		if equality.Semantic.DeepEqual(orig.Status, task.Status) {
			return
		}
		if perr := r.Status().Patch(ctx, &task, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsConflict(perr) {
				res = ctrl.Result{RequeueAfter: conflictRequeue}
				return
			}
			err = errors.Join(err, fmt.Errorf("failed to patch status of task %q: %w", task.Name, perr))
		}
	}()

	if task.Status.Phase.Terminal() {
		return ctrl.Result{}, nil
	}
	if task.Status.Phase == "" {
		task.Status.Phase = tatarav1.PhasePending
	}
	if task.Spec.Cancel != nil {
		return ctrl.Result{}, r.cancel(ctx, &task)
	}

	var project tatarav1.Project
	if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.ProjectRef.Name}, &project); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(&task, metav1.ConditionFalse, tatarav1.ReasonProjectNotFound,
				fmt.Sprintf("project %q not found in namespace %q", task.Spec.ProjectRef.Name, task.Namespace))
			return ctrl.Result{}, nil // the Project watch requeues this Task
		}
		return ctrl.Result{}, fmt.Errorf("failed to get project %q: %w", task.Spec.ProjectRef.Name, err)
	}
	if task.Spec.Repo != "" && !project.HasRepo(task.Spec.Repo) {
		r.setReady(&task, metav1.ConditionFalse, tatarav1.ReasonRepoNotFound,
			fmt.Sprintf("project %q has no repo %q", project.Name, task.Spec.Repo))
		return ctrl.Result{}, nil
	}

	if err := r.ensureSecret(ctx, &task); err != nil {
		return ctrl.Result{}, err
	}
	pod, err := r.ensurePod(ctx, &task, &project)
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	r.mirrorPod(&task, pod)
	return ctrl.Result{}, nil
}

func ownedBy(o client.Object, task *tatarav1.Task) bool {
	owner := metav1.GetControllerOf(o)
	return owner != nil && owner.UID == task.UID
}

// errStaleObject makes the controller retry once a stale object is gone.
var errStaleObject = errors.New("deleted an object left over from an earlier task of the same name; retrying")

func (r *TaskReconciler) deleteStale(ctx context.Context, o client.Object) error {
	uid := o.GetUID()
	err := r.Delete(ctx, o, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete stale %s %q: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	return errStaleObject
}

// ensureSecret creates the Task's token Secret once; an existing Secret is never re-minted,
// so a restarted operator keeps the token the running agent already holds.
func (r *TaskReconciler) ensureSecret(ctx context.Context, task *tatarav1.Task) error {
	name := agent.SecretName(task.Name)
	task.Status.SecretName = name
	var existing corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &existing)
	if err == nil {
		if ownedBy(&existing, task) {
			return nil
		}
		// Left over from a deleted Task of the same name that the garbage collector has not
		// removed yet: its token must not pass to the new Task.
		return r.deleteStale(ctx, &existing)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to get secret %q: %w", name, err)
	}
	tok, err := token.New()
	if err != nil {
		return err
	}
	if err := r.Create(ctx, agent.BuildSecret(task, tok)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // created by an earlier reconcile the cache has not seen yet
		}
		return fmt.Errorf("failed to create secret %q: %w", name, err)
	}
	if r.Metrics != nil {
		r.Metrics.TokenSecretsCreated.Inc()
	}
	return nil
}

// runtimeImage reads key "image" of a runtime ConfigMap; the error is a condition reason.
func (r *TaskReconciler) runtimeImage(ctx context.Context, name string) (string, string, error) {
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: r.Config.RuntimeNamespace, Name: name}
	if err := r.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", tatarav1.ReasonRuntimeConfigMissing, fmt.Errorf("configmap %s not found: install its chart or create it with key %q", key, ImageKey)
		}
		return "", "", fmt.Errorf("failed to get configmap %s: %w", key, err)
	}
	img := cm.Data[ImageKey]
	if img == "" {
		return "", tatarav1.ReasonRuntimeConfigInvalid, fmt.Errorf("configmap %s has no non-empty key %q", key, ImageKey)
	}
	return img, "", nil
}

// ensurePod returns the Task's pod, creating it when it never existed. nil, nil means the
// Task waits (a condition says why) or its pod vanished (the Task failed).
func (r *TaskReconciler) ensurePod(ctx context.Context, task *tatarav1.Task, project *tatarav1.Project) (*corev1.Pod, error) {
	name := agent.PodName(task.Name)
	var pod corev1.Pod
	err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &pod)
	if err == nil {
		if !ownedBy(&pod, task) {
			return nil, r.deleteStale(ctx, &pod)
		}
		return &pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to get pod %q: %w", name, err)
	}
	if task.Status.PodName != "" {
		// The cache may lag behind our own create: ask the API server before concluding.
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &pod)
		if err == nil {
			return &pod, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("failed to get pod %q: %w", name, err)
		}
		// One pod per Task, ever: a pod that disappeared is not replaced.
		task.Status.Phase = tatarav1.PhaseFailed
		r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodMissing, fmt.Sprintf("agent pod %q was deleted before it finished", name))
		task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, "agent pod deleted before it finished")
		return nil, nil
	}

	cfg := agent.Config{OperatorURL: r.Config.OperatorURL, MemoryURL: r.Config.MemoryURL, ChatURL: r.Config.ChatURL}
	for _, rc := range []struct {
		cm  string
		dst *string
	}{{CLIRuntimeConfigMap, &cfg.CLIImage}, {WrapperRuntimeConfigMap, &cfg.WrapperImage}} {
		img, reason, err := r.runtimeImage(ctx, rc.cm)
		if err != nil && reason == "" {
			return nil, err
		}
		if err != nil {
			r.setReady(task, metav1.ConditionFalse, reason, err.Error())
			return nil, nil // the ConfigMap watch requeues this Task
		}
		*rc.dst = img
	}

	// The deterministic name makes the create itself the duplicate check: a pod created by
	// an earlier reconcile whose status write was lost answers AlreadyExists.
	desired := agent.BuildPod(task, project, cfg)
	if err := r.Create(ctx, desired); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// The API server refused the pod (e.g. a Project extraEnv it rejects, Pod Security,
			// a quota): say so on the Task. Invalid stays until the Task or Project changes (both
			// watched); Forbidden may pass (quota), so it is retried with backoff.
			r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodRejected, fmt.Sprintf("the API server rejected agent pod %q: %v", name, err))
			if apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("failed to create pod %q: %w", name, err)
			}
			return nil, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create pod %q: %w", name, err)
		}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &pod); err != nil {
			return nil, fmt.Errorf("failed to get pod %q: %w", name, err)
		}
		if !ownedBy(&pod, task) {
			return nil, r.deleteStale(ctx, &pod)
		}
		task.Status.PodName = name
		return &pod, nil
	}
	if r.Metrics != nil {
		r.Metrics.AgentPodsCreated.Inc()
	}
	logf.FromContext(ctx).Info("created agent pod", "pod", name, "kind", task.Spec.Kind, "profile", agent.ToolProfileForKind(task.Spec.Kind))
	task.Status.PodName = name
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, fmt.Sprintf("agent pod %s created (profile %q)", name, agent.ToolProfileForKind(task.Spec.Kind)))
	r.event(task, "PodCreated", "Create", fmt.Sprintf("created agent pod %s", name))
	return desired, nil
}

// cancel deletes the pod (if any) and ends the Task as Cancelled.
func (r *TaskReconciler) cancel(ctx context.Context, task *tatarav1.Task) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: task.Namespace, Name: agent.PodName(task.Name)}}
	if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete pod %q: %w", pod.Name, err)
	}
	msg := "cancelled"
	if task.Spec.Cancel.Reason != "" {
		msg = "cancelled: " + task.Spec.Cancel.Reason
	}
	task.Status.Phase = tatarav1.PhaseCancelled
	r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonCancelled, msg)
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, msg)
	r.event(task, tatarav1.ReasonCancelled, "Cancel", msg)
	return nil
}

func (r *TaskReconciler) event(task *tatarav1.Task, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, reason, action, "%s", note)
	}
}

// SetupWithManager registers the controller: Tasks, their pods and Secrets, and the Projects
// and runtime ConfigMaps a waiting Task depends on.
func (r *TaskReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&tatarav1.Task{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Secret{}).
		Watches(&tatarav1.Project{}, handler.EnqueueRequestsFromMapFunc(r.tasksOfProject)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.waitingTasks),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.isRuntimeConfigMap))).
		Named("task").
		WithOptions(opts)
	return b.Complete(r)
}

func (r *TaskReconciler) isRuntimeConfigMap(o client.Object) bool {
	return o.GetNamespace() == r.Config.RuntimeNamespace &&
		(o.GetName() == CLIRuntimeConfigMap || o.GetName() == WrapperRuntimeConfigMap)
}

func (r *TaskReconciler) tasksOfProject(ctx context.Context, o client.Object) []reconcile.Request {
	var list tatarav1.TaskList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.TaskProject: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "failed to list tasks of project", "project", o.GetName())
		return nil
	}
	return pendingRequests(list.Items)
}

func (r *TaskReconciler) waitingTasks(ctx context.Context, _ client.Object) []reconcile.Request {
	var list tatarav1.TaskList
	if err := r.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "failed to list tasks")
		return nil
	}
	return pendingRequests(list.Items)
}

// pendingRequests keeps the Tasks that still wait for their pod.
func pendingRequests(tasks []tatarav1.Task) []reconcile.Request {
	var out []reconcile.Request
	for _, t := range tasks {
		if t.Status.PodName == "" && !t.Status.Phase.Terminal() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return out
}
