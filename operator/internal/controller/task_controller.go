// Package controller reconciles Tasks into their token Secret and agent pod, and mirrors the
// pod's state into the Task status; it also keeps each Project's warm pool (pool_controller.go)
// and Ready condition (project_controller.go).
//
// A Task's lifecycle. This file owns it: Reconcile is the one entry, and the deferred status
// write at its top is the controller's only status write besides the persist step before a pod
// is created. The phases (api/v1alpha1 TaskPhase) and what moves each:
//   - Pending: set on the first reconcile; it stays Pending with a Ready reason that says why
//     while the Project, repo, runtime ConfigMaps or kind are missing (Reconcile and
//     runtime_resources.go), then the token Secret is minted (ensureSecret, here; the token's
//     own life is in internal/token) and an attempt starts: a pool pod claimed (claimWarm,
//     pool_claim.go) or a pod created (startAttempt, attempts.go), each recorded in status.attempts
//     before the pod exists;
//   - Running: mirrored from the pod (mirrorPod, status.go);
//   - Succeeded, Failed: the pod's end, mirrored (mirrorPod, status.go: the wrapper's exit code, a
//     failed clone, an init container, the deadline), a lost pod without a retry (attemptLost,
//     attempts.go; with a retry the Task goes back to Pending for attempt 2), or a restarted
//     sidecar (Reconcile; its pod is deleted once that end is recorded, deleteStoppedPod); every
//     end goes through endTask (attempts.go), which finishes the attempt and adds the activity
//     entry;
//   - Cancelled: spec.cancel or a cancelled ancestor (cancel.go), which also deletes the pod.
//
// Once terminal, the Task's Secret is deleted (deleteSecret, here) and nothing moves it again.
//
// The status has a second writer, the REST API (its decisions in operator/internal/taskops: notes
// in notes.go, intents and their activity entries through updateStatus in status.go). Both write
// under the API server's optimistic lock (here, a merge patch carrying the resourceVersion; a
// conflict requeues and recomputes from the newer Task), so neither overwrites the other
// (test/integration/status_writers_test.go).
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/buildinfo"
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
	// OperatorCABundle returns the PEM of the REST API's CA, for TATARA_OPERATOR_CA_BUNDLE; nil
	// or "" when the API is plain HTTP or its certificate needs no CA of its own. It is called
	// for each pod, so a CA the operator issues anew reaches the pods created after it.
	OperatorCABundle func() string
	// NodeLostAfter is how long a node may not be Ready before the attempts whose pods run on it
	// are lost (node_lost.go); 0 is DefaultNodeLostAfter.
	NodeLostAfter time.Duration
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
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
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
		if !equality.Semantic.DeepEqual(orig.Status, task.Status) {
			if perr := r.Status().Patch(ctx, &task, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); perr != nil {
				if apierrors.IsConflict(perr) {
					res = ctrl.Result{RequeueAfter: conflictRequeue}
					return
				}
				err = errors.Join(err, fmt.Errorf("failed to patch status of task %q: %w", task.Name, perr))
				return
			}
		}
		// An ended Task's token stops working (the REST API checks the phase), and its Secret
		// goes: once the terminal phase is recorded, so a failed delete is retried from it.
		if task.Status.Phase.Terminal() {
			err = errors.Join(err, r.deleteSecret(ctx, &task), r.deleteStoppedPod(ctx, &task))
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
	if cascaded, err := r.cancelIfAncestorCancelled(ctx, &task); err != nil || cascaded {
		return ctrl.Result{}, err
	}

	// The CRD's enum keeps unknown kinds out, but a Task that a newer CRD admitted outlives a
	// rollback to this operator, and a kind it cannot map would fail open.
	if agent.ToolProfileForKind(task.Spec.Kind) == "" {
		r.setReady(&task, metav1.ConditionFalse, tatarav1.ReasonUnknownKind, fmt.Sprintf(
			"task kind %q is unknown to this operator (version %s), which would give its agent every tool; no pod is started: upgrade the operator, or delete the Task",
			task.Spec.Kind, buildinfo.Version))
		return ctrl.Result{}, nil
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

	// A freshly minted token's hash is recorded with the attempt, before the pod exists (or by the
	// deferred write when no pod is created yet): a pod never runs with a token that authenticates
	// nobody, and a restart before that write leaves a Secret whose token is not recorded, which
	// the next reconcile replaces.
	if _, err := r.ensureSecret(ctx, &task); err != nil {
		if errors.Is(err, errStaleCache) {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, err
	}
	// persist writes the status now, for what must be recorded before the pod is created.
	persist := func() error {
		if err := r.Status().Patch(ctx, &task, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		orig = task.DeepCopy()
		return nil
	}
	pod, err := r.ensurePod(ctx, &task, &project, persist)
	if apierrors.IsConflict(err) || errors.Is(err, errStaleCache) || errors.Is(err, errClaimNotMade) {
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	if sidecar, restarts, ok := agent.RestartedSidecar(pod); ok {
		msg := fmt.Sprintf("sidecar %s of agent pod %s restarted (%d restarts): the agent could have taken its port meanwhile, so the pod was stopped", sidecar, pod.Name, restarts)
		// The end is recorded first and the pod deleted after (deleteStoppedPod): the restart is
		// read off the pod, and a pod deleted before the record would leave only "deleted".
		r.endTask(&task, tatarav1.PhaseFailed, tatarav1.ReasonSidecarRestarted, msg)
		return ctrl.Result{}, nil
	}
	msg, lost, recheck, err := r.nodeLoss(ctx, pod, time.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	if lost {
		// The pod is deleted once this is recorded: by the retry (ensurePod) or, for a Task that
		// ends here, deleteStoppedPod.
		r.attemptLost(&task, retryAllowed(&project, &task), tatarav1.ReasonNodeLost,
			fmt.Sprintf("agent pod %s%s %s", pod.Name, attemptNote(&task), msg))
		return ctrl.Result{}, nil
	}
	r.mirrorPod(&task, pod, retryAllowed(&project, &task))
	// A node that is not Ready yet not lost: look again when it would be.
	return ctrl.Result{RequeueAfter: recheck}, nil
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

// errStaleCache makes the controller retry soon: the cached Task is older than the token Secret.
var errStaleCache = errors.New("the cached task is older than its token secret; retrying")

// ensureSecret makes sure the Task's token Secret is the one the operator minted: under the
// expected name, controlled by the Task, holding a token whose hash is status.tokenHash. An
// existing Secret that is anything else (left over from a deleted Task of the same name, planted
// in advance, or created by a reconcile that stopped before recording its hash) is never trusted:
// it is deleted and a fresh token is minted. A trusted Secret is never re-minted, so a restarted
// operator keeps the token the running agent already holds. minted reports a new token, whose
// hash the caller must record in the status before the pod is created.
func (r *TaskReconciler) ensureSecret(ctx context.Context, task *tatarav1.Task) (minted bool, err error) {
	name := agent.SecretName(task.Name)
	task.Status.SecretName = name
	key := types.NamespacedName{Namespace: task.Namespace, Name: name}
	var existing corev1.Secret
	err = r.Get(ctx, key, &existing)
	if err == nil {
		return false, r.checkSecret(ctx, task, &existing)
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("failed to get secret %q: %w", name, err)
	}
	tok, err := token.New()
	if err != nil {
		return false, err
	}
	if err := r.Create(ctx, agent.BuildSecret(task, tok)); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("failed to create secret %q: %w", name, err)
		}
		// Created by an earlier reconcile the cache has not seen yet, or by someone else (the
		// cache holds only the operator's labelled Secrets): judged like any existing one.
		if err := r.APIReader.Get(ctx, key, &existing); err != nil {
			return false, fmt.Errorf("failed to get secret %q: %w", name, err)
		}
		return false, r.checkSecret(ctx, task, &existing)
	}
	task.Status.TokenHash = token.Hash(tok)
	if r.Metrics != nil {
		r.Metrics.TokenSecretsCreated.Inc()
	}
	return true, nil
}

// checkSecret accepts an existing token Secret only if it is the one whose token hash the Task's
// status records; anything else is deleted.
func (r *TaskReconciler) checkSecret(ctx context.Context, task *tatarav1.Task, s *corev1.Secret) error {
	if !ownedBy(s, task) {
		// Not the Task's (a deleted Task of the same name, or planted): its token must not pass.
		return r.deleteStale(ctx, s)
	}
	if token.Matches(string(s.Data[agent.TokenKey]), task.Status.TokenHash) {
		return nil
	}
	// Before deleting a Secret the Task controls, make sure the cached Task is not just older
	// than the status write that recorded its hash: that Secret's token may be in a running pod.
	var fresh tatarav1.Task
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(task), &fresh); err != nil {
		return fmt.Errorf("failed to get task %q: %w", task.Name, err)
	}
	if fresh.UID == task.UID && fresh.Status.TokenHash != task.Status.TokenHash {
		return errStaleCache
	}
	return r.deleteStale(ctx, s)
}

// deleteStoppedPod deletes the pod of an attempt that ended because a sidecar restarted, once
// that end is recorded: only that pod (its recorded uid), which may still run with something else
// on the sidecar's port. The pods of other ends stop on their own or were deleted before.
func (r *TaskReconciler) deleteStoppedPod(ctx context.Context, task *tatarav1.Task) error {
	cur := task.Status.CurrentAttempt()
	if cur == nil || (cur.Reason != tatarav1.ReasonSidecarRestarted && cur.Reason != tatarav1.ReasonNodeLost) || cur.PodUID == "" {
		return nil
	}
	var pod corev1.Pod
	if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: cur.PodName}, &pod); err != nil {
		return client.IgnoreNotFound(err) // gone (the cache may lag: the next reconcile looks again)
	}
	if pod.UID != cur.PodUID {
		return nil
	}
	if cur.Reason == tatarav1.ReasonNodeLost {
		return r.forceDeletePod(ctx, &pod)
	}
	return r.deletePod(ctx, &pod)
}

// deleteSecret removes the token Secret of an ended Task; its token no longer authenticates.
func (r *TaskReconciler) deleteSecret(ctx context.Context, task *tatarav1.Task) error {
	var s corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: agent.SecretName(task.Name)}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get secret %q: %w", agent.SecretName(task.Name), err)
	}
	uid := s.UID
	if err := r.Delete(ctx, &s, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete secret %q of ended task %q: %w", s.Name, task.Name, err)
	}
	return nil
}

// requiredFeatures are the features (agentpod.FeaturesKey) this operator's pods need of each
// runtime ConfigMap's image: without them a Task waits with RuntimeConfigInvalid naming the chart
// version that has them, instead of getting a pod that fails.
var requiredFeatures = map[string]struct {
	features []string
	since    string
}{
	WrapperRuntimeConfigMap: {[]string{agentpod.FeatureWorkspaceInit}, "tatara-wrapper 0.6.0"},
}

// runtimeConfig is what one runtime ConfigMap says beside its containers' resources.
type runtimeConfig struct {
	image          string
	scrapeInterval time.Duration
	// features are what its image can do (agentpod.FeaturesKey).
	features []string
	// recordInternalIssues is RecordInternalIssuesKey (the cli's ConfigMap writes it).
	recordInternalIssues bool
}

// readRuntimeConfig reads one runtime ConfigMap: its image, the resources of its containers into
// res, its scrape interval, its image's features and the cli's recording switch. A missing
// ConfigMap, a missing image, a malformed value or a missing required feature return a reason for
// the Task's or Project's condition (the ConfigMap watch requeues them when it changes); other
// errors none. The Task, Project and pool reconcilers share it, so a Project is Ready exactly when
// its Tasks would find the runtime ConfigMaps usable.
func readRuntimeConfig(ctx context.Context, c client.Reader, namespace, name string, res *agent.Resources) (runtimeConfig, string, error) {
	var rc runtimeConfig
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return rc, tatarav1.ReasonRuntimeConfigMissing, fmt.Errorf("configmap %s not found: install its chart or create it with key %q", key, ImageKey)
		}
		return rc, "", fmt.Errorf("failed to get configmap %s: %w", key, err)
	}
	img := cm.Data[ImageKey]
	if img == "" {
		return rc, tatarav1.ReasonRuntimeConfigInvalid, fmt.Errorf("configmap %s has no non-empty key %q", key, ImageKey)
	}
	err := runtimeResources(&cm, res)
	if err != nil {
		return rc, tatarav1.ReasonRuntimeConfigInvalid, err
	}
	if rc.scrapeInterval, err = runtimeScrapeInterval(&cm); err != nil {
		return rc, tatarav1.ReasonRuntimeConfigInvalid, err
	}
	if rc.recordInternalIssues, err = runtimeRecordInternalIssues(&cm); err != nil {
		return rc, tatarav1.ReasonRuntimeConfigInvalid, err
	}
	have := strings.Split(cm.Data[agentpod.FeaturesKey], ",")
	for _, f := range requiredFeatures[name].features {
		if !slices.Contains(have, f) {
			return rc, tatarav1.ReasonRuntimeConfigInvalid, fmt.Errorf("configmap %s lists no feature %q under key %q: this operator's agent pods need it of the image (%s or later; roll that chart forward, or this operator back)",
				key, f, agentpod.FeaturesKey, requiredFeatures[name].since)
		}
	}
	rc.image, rc.features = img, have
	return rc, "", nil
}

// podConfig is the pod builder's input: the operator's URLs and the runtime ConfigMaps' images
// and container resources. ok false means the Task waits for a ConfigMap (its condition says which).
func (r *TaskReconciler) podConfig(ctx context.Context, task *tatarav1.Task) (agent.Config, bool, error) {
	cfg, reason, err := agentConfig(ctx, r.Client, r.Config)
	if err != nil && reason == "" {
		return cfg, false, err
	}
	if err != nil {
		r.setReady(task, metav1.ConditionFalse, reason, err.Error())
		return cfg, false, nil // the ConfigMap watch requeues this Task
	}
	return cfg, true, nil
}

// agentConfig reads the pod builder's input for a Task's pod or a pool pod. An error with a
// reason is a runtime ConfigMap that is missing or invalid (the reason is a Ready condition's).
func agentConfig(ctx context.Context, c client.Reader, conf Config) (agent.Config, string, error) {
	cfg := agent.Config{OperatorURL: conf.OperatorURL, MemoryURL: conf.MemoryURL, ChatURL: conf.ChatURL, OperatorVersion: buildinfo.Version}
	if conf.OperatorCABundle != nil {
		cfg.OperatorCABundle = conf.OperatorCABundle()
	}
	cli, reason, err := readRuntimeConfig(ctx, c, conf.RuntimeNamespace, CLIRuntimeConfigMap, &cfg.Resources)
	if err != nil {
		return cfg, reason, err
	}
	wrapper, reason, err := readRuntimeConfig(ctx, c, conf.RuntimeNamespace, WrapperRuntimeConfigMap, &cfg.Resources)
	if err != nil {
		return cfg, reason, err
	}
	cfg.CLIImage, cfg.CLIScrapeInterval = cli.image, cli.scrapeInterval
	cfg.WrapperImage, cfg.WrapperScrapeInterval = wrapper.image, wrapper.scrapeInterval
	cfg.ClaimFetchesRef = slices.Contains(cli.features, agentpod.FeatureClaimRef) && slices.Contains(wrapper.features, agentpod.FeatureClaimRef)
	cfg.ModelGateway = slices.Contains(cli.features, agentpod.FeatureModelGateway)
	cfg.RecordInternalIssues = cli.recordInternalIssues
	return cfg, "", nil
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
		Watches(&corev1.Pod{}, podEvents(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &tatarav1.Task{}, handler.OnlyControllerOwner()))).
		Owns(&corev1.Secret{}).
		// A node whose readiness changes: the Tasks whose pods it runs (node_lost.go).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.tasksOnNode), builder.WithPredicates(nodeReadinessChanged)).
		Watches(&tatarav1.Project{}, handler.EnqueueRequestsFromMapFunc(r.tasksOfProject)).
		// A cancelled Task's unfinished descendants, to cancel them too.
		Watches(&tatarav1.Task{}, handler.EnqueueRequestsFromMapFunc(r.descendantsOfCancelled)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.waitingTasks),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Config.isRuntimeConfigMap))).
		Named("task").
		WithOptions(opts)
	return b.Complete(r)
}

// isRuntimeConfigMap reports whether o is one of the runtime ConfigMaps every agent pod is built
// from: the Task, Project and pool controllers watch them.
func (c Config) isRuntimeConfigMap(o client.Object) bool {
	return o.GetNamespace() == c.RuntimeNamespace &&
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

// pendingRequests keeps the Tasks that still wait for their pod: the first one, or a retry's.
func pendingRequests(tasks []tatarav1.Task) []reconcile.Request {
	var out []reconcile.Request
	for _, t := range tasks {
		a := t.Status.CurrentAttempt()
		if (t.Status.PodName == "" || (a != nil && a.Finished())) && !t.Status.Phase.Terminal() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return out
}
