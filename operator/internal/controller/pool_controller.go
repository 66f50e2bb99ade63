package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/metrics"
)

// The warm pool's lifecycle. This file owns it; its states are a pool pod's:
//   - starting: created by PoolReconciler from the Project's spec.warmPool, cloning or starting;
//   - ready: agent.Claimable, waiting for a Task (the handshake: package tatara.dev/cli/pkg/claim);
//   - claimed: a Task became its controller (TaskReconciler.claimWarm, pool_claim.go); from then on it
//     is that Task's pod like any other, and goes with it;
//   - replaced: deleted unclaimed, because what it was built from changed (agent.PoolTemplateHash),
//     it outlived PoolPodMaxAge, it failed, a sidecar of it restarted, or the pool shrank.
// A claim and a replacement of the same pod race safely: both write with its resourceVersion as a
// precondition, so only one of them happens.

// PoolPodMaxAge is how long an unclaimed pool pod is kept: its checkout is as old as the pod, so
// a pod older than this is replaced with a fresh clone.
const PoolPodMaxAge = 30 * time.Minute

// PoolFailureHold is how long a failed pool pod is kept after it ended (for its logs) before it is
// replaced; while it is, its pool creates no pod, so a clone that keeps failing costs one pod a
// minute.
const PoolFailureHold = time.Minute

// poolCreateExpiry is how long a pod this process created counts as live before the cache shows
// it; past it, the cache is trusted again.
const poolCreateExpiry = 30 * time.Second

// PoolReconciler keeps each Project's warm pools at their size.
type PoolReconciler struct {
	client.Client
	Config  Config
	Metrics *metrics.Metrics
	// MaxAge replaces PoolPodMaxAge, and FailureHold PoolFailureHold, when set.
	MaxAge, FailureHold time.Duration

	// created remembers the pods this process created that the cache may not show yet, so a
	// reconcile right after a create does not create them again.
	mu      sync.Mutex
	created map[types.NamespacedName]map[createdPod]time.Time
}

type createdPod struct {
	kind tatarav1.TaskKind
	name string
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch

// Reconcile creates and deletes the Project's unclaimed pool pods.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var project tatarav1.Project
	if err := r.Get(ctx, req.NamespacedName, &project); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err) // its pods go with it (owner references)
	}
	if !project.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(project.Namespace), client.MatchingLabels{agent.LabelProject: project.Name},
		client.HasLabels{agent.LabelPool}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list pool pods of project %q: %w", project.Name, err)
	}
	cfg, reason, err := agentConfig(ctx, r.Client, r.Config)
	if err != nil && reason == "" {
		return ctrl.Result{}, err
	}
	// Else the Project's Ready condition says why; no pool pod is built.
	buildable := err == nil && (project.Spec.Agent.Model == nil || cfg.ModelGateway)

	maxAge, hold := r.MaxAge, r.FailureHold
	if maxAge <= 0 {
		maxAge = PoolPodMaxAge
	}
	if hold <= 0 {
		hold = PoolFailureHold
	}
	now := time.Now()
	var requeue time.Duration
	live := map[tatarav1.TaskKind][]*corev1.Pod{}
	failed := map[tatarav1.TaskKind]int{}
	var stale []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if owner := metav1.GetControllerOf(pod); owner == nil || owner.UID != project.UID || !pod.DeletionTimestamp.IsZero() {
			continue // claimed (its Task's now), or going
		}
		kind := tatarav1.TaskKind(pod.Labels[agent.LabelPool])
		pool, ok := poolOf(&project, kind)
		switch {
		case !ok || !buildable || pod.Annotations[agent.AnnotationPoolTemplate] != poolTemplate(&project, pool, cfg):
			stale = append(stale, pod)
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			if held := now.Sub(failedAt(pod)); held < hold {
				failed[kind]++
				requeue = minPositive(requeue, hold-held)
				continue
			}
			stale = append(stale, pod)
		case now.Sub(pod.CreationTimestamp.Time) >= maxAge:
			stale = append(stale, pod)
		case restarted(pod):
			// Never claimable again (agent.Claimable): replaced at once, no failure hold, as
			// nothing of the pod's clone or template is wrong.
			stale = append(stale, pod)
		default:
			live[kind] = append(live[kind], pod)
			requeue = minPositive(requeue, maxAge-now.Sub(pod.CreationTimestamp.Time))
		}
	}
	var toCreate []tatarav1.WarmPool
	for _, pool := range project.Spec.WarmPool {
		pods := live[pool.Kind]
		pending := r.pending(req.NamespacedName, pool.Kind, pods, now)
		// The oldest go first when the pool shrank: theirs are the oldest checkouts.
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		for extra := len(pods) + pending - int(pool.Size); extra > 0 && len(pods) > 0; extra-- {
			stale, pods = append(stale, pods[0]), pods[1:]
		}
		for range max(0, int(pool.Size)-len(pods)-pending) {
			if buildable && failed[pool.Kind] == 0 {
				toCreate = append(toCreate, pool)
			}
		}
		template := ""
		if buildable {
			template = poolTemplate(&project, pool, cfg)
		}
		r.observe(&project, pool.Kind, pods, template, failed[pool.Kind])
	}
	r.forgetRemovedPools(&project)
	for _, pod := range stale {
		if err := r.deleteUnclaimed(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, pool := range toCreate {
		pod := agent.BuildPoolPod(&project, pool, cfg)
		if err := r.Create(ctx, pod); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to create a pool pod of project %q, kind %s: %w", project.Name, pool.Kind, err)
		}
		r.remember(req.NamespacedName, pool.Kind, pod.Name, now)
		logf.FromContext(ctx).Info("created pool pod", "pod", pod.Name, "kind", pool.Kind)
	}
	if requeue > 0 {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	return ctrl.Result{}, nil
}

// failedAt is when a pool pod ended: its last container's end, else its creation.
func failedAt(pod *corev1.Pod) time.Time {
	at := pod.CreationTimestamp.Time
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if term := st.State.Terminated; term != nil && term.FinishedAt.After(at) {
			at = term.FinishedAt.Time
		}
	}
	return at
}

func restarted(pod *corev1.Pod) bool {
	_, _, ok := agent.RestartedSidecar(pod)
	return ok
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// poolOf is the Project's pool of kind, if it has one of a size above 0.
func poolOf(project *tatarav1.Project, kind tatarav1.TaskKind) (tatarav1.WarmPool, bool) {
	for _, p := range project.Spec.WarmPool {
		if p.Kind == kind && p.Size > 0 {
			return p, true
		}
	}
	return tatarav1.WarmPool{}, false
}

// poolTemplate is the template hash a pool pod of pool must carry to be kept or claimed.
func poolTemplate(project *tatarav1.Project, pool tatarav1.WarmPool, cfg agent.Config) string {
	return agent.BuildPoolPod(project, pool, cfg).Annotations[agent.AnnotationPoolTemplate]
}

// deleteUnclaimed deletes pod only as the pool pod it was when read: a claim that got in first
// changed its resourceVersion, and the delete then fails with a conflict instead.
func (r *PoolReconciler) deleteUnclaimed(ctx context.Context, pod *corev1.Pod) error {
	uid, rv := pod.UID, pod.ResourceVersion
	err := r.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("pool pod %q changed before it could be replaced (claimed?); looking again: %w", pod.Name, err)
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete pool pod %q: %w", pod.Name, err)
	}
	logf.FromContext(ctx).Info("replaced pool pod", "pod", pod.Name, "kind", pod.Labels[agent.LabelPool])
	return nil
}

// observe sets the pool's gauge: its ready, starting and (recently) failed pods.
func (r *PoolReconciler) observe(project *tatarav1.Project, kind tatarav1.TaskKind, pods []*corev1.Pod, template string, failed int) {
	if r.Metrics == nil {
		return
	}
	ready := 0
	for _, p := range pods {
		if agent.Claimable(p, project, template) {
			ready++
		}
	}
	g := r.Metrics.WarmPoolPods
	g.WithLabelValues(project.Namespace, project.Name, string(kind), "ready").Set(float64(ready))
	g.WithLabelValues(project.Namespace, project.Name, string(kind), "starting").Set(float64(len(pods) - ready))
	g.WithLabelValues(project.Namespace, project.Name, string(kind), "failed").Set(float64(failed))
}

// forgetRemovedPools drops the gauge's series of the kinds the Project has no pool of (any more),
// so an alert on an empty pool does not outlive the pool.
func (r *PoolReconciler) forgetRemovedPools(project *tatarav1.Project) {
	if r.Metrics == nil {
		return
	}
	for _, kind := range tatarav1.TaskKinds {
		if !slices.ContainsFunc(project.Spec.WarmPool, func(p tatarav1.WarmPool) bool { return p.Kind == kind }) {
			r.Metrics.WarmPoolPods.DeletePartialMatch(map[string]string{"namespace": project.Namespace, "project": project.Name, "kind": string(kind)})
		}
	}
}

// remember records a pod this process created; pending counts those of kind the cache does not
// show yet (and forgets the ones it shows, or that expired).
func (r *PoolReconciler) remember(project types.NamespacedName, kind tatarav1.TaskKind, name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.created == nil {
		r.created = map[types.NamespacedName]map[createdPod]time.Time{}
	}
	if r.created[project] == nil {
		r.created[project] = map[createdPod]time.Time{}
	}
	r.created[project][createdPod{kind, name}] = now
}

func (r *PoolReconciler) pending(project types.NamespacedName, kind tatarav1.TaskKind, seen []*corev1.Pod, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for key, at := range r.created[project] {
		if key.kind != kind {
			continue
		}
		if now.Sub(at) > poolCreateExpiry || slices.ContainsFunc(seen, func(p *corev1.Pod) bool { return p.Name == key.name }) {
			delete(r.created[project], key)
			continue
		}
		n++
	}
	return n
}

func (r *PoolReconciler) forget(project types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.created, project)
	if r.Metrics != nil {
		r.Metrics.WarmPoolPods.DeletePartialMatch(map[string]string{"namespace": project.Namespace, "project": project.Name})
	}
}

// SetupWithManager registers the controller: Projects, their pool pods, and the runtime
// ConfigMaps every pool pod is built from.
func (r *PoolReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&tatarav1.Project{}).
		// A claim moves the pod's controller from the Project to the Task: the update event
		// names both, so the pool refills at once.
		Owns(&corev1.Pod{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(projects(r.Client, func(p *tatarav1.Project) bool { return len(p.Spec.WarmPool) > 0 })),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Config.isRuntimeConfigMap))).
		Named("warmpool").
		WithOptions(opts).
		Complete(r)
}
