package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/claim"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Warm pool pods: built before any Task, from the Project and the pool's kind alone. They carry
// LabelPool; a Task claims one by becoming its controller and adding its own labels
// (ClaimPoolPod), and the pod then learns the Task from the operator's claim endpoint.
const (
	// LabelPool marks a pool pod; its value is the pool's kind. A claimed pod keeps it.
	LabelPool = "tatara.dev/pool"
	// AnnotationPoolTemplate is the hash of what the pod was built from (PoolTemplateHash): a pod
	// whose hash differs from the pool's current one is replaced, never claimed.
	AnnotationPoolTemplate = "tatara.dev/pool-template"
	// PoolPodNamePrefix starts every pool pod's generated name.
	PoolPodNamePrefix = "tatara-pool-"

	claimVolume      = "claim"
	claimTokenVolume = "claim-token"
	// claimTokenSeconds is the projected token's lifetime; the kubelet renews it well before.
	claimTokenSeconds = 3600
)

// BuildPoolPod returns a pool pod of the Project's pool: no Task's name, token, directive or push
// branch is in it. Its owner is the Project (so it goes with it); it has no active deadline until
// a claim sets the Task's (counted from the claim, not from the pod's start).
func BuildPoolPod(project *tatarav1.Project, pool tatarav1.WarmPool, cfg Config) *corev1.Pod {
	pod := buildPod(target{kind: pool.Kind, repo: pool.Repo}, project, cfg)
	pod.GenerateName = fmt.Sprintf("%s%s-%s-", PoolPodNamePrefix, project.Name, pool.Kind)
	if pod.Spec.ServiceAccountName == "" {
		// A projected token needs a named ServiceAccount; "default" is what admission would set.
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Labels = map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelName:      AgentNameValue,
		LabelProject:   project.Name,
		LabelKind:      string(pool.Kind),
		LabelPool:      string(pool.Kind),
	}
	pod.Annotations = map[string]string{AnnotationPoolTemplate: PoolTemplateHash(pod, cfg.OperatorVersion)}
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion:         tatarav1.GroupVersion.String(),
		Kind:               "Project",
		Name:               project.Name,
		UID:                project.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
	return pod
}

// PoolTemplateHash is the hash of a pool pod's spec and labels, as BuildPoolPod made them, and of
// the version of the operator that built it: it changes with anything the pod is built from (the
// Project, the runtime ConfigMaps' images, resources and settings, the operator's URLs and CA, and
// the operator itself: an upgrade or a rollback of the operator recycles the pool even when the
// pods would come out the same, so no pool pod is claimed under rules its builder did not know).
func PoolTemplateHash(pod *corev1.Pod, operatorVersion string) string {
	b, err := json.Marshal(struct {
		Labels   map[string]string
		Spec     corev1.PodSpec
		Operator string
	}{pod.Labels, pod.Spec, operatorVersion})
	if err != nil {
		panic(fmt.Sprintf("a pod spec always encodes: %v", err)) // a programming error, not input
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Claimable is the one rule of which pool pod a Task of project may take now, for the claim
// (controller/pool_claim.go) and for the pool's count of ready pods (pool_controller.go): a pod of
// project's pool (the Project is its controller), built from what the pool is built from now
// (template, the pool's PoolTemplateHash; an older pod is being replaced), not yet claimed, not
// going away, its clone done, its containers running and none of its sidecars restarted. A Task
// that claimed a pod whose sidecar restarted would fail at once (RestartedSidecar), though nothing
// of it ran there: the pool replaces such a pod instead.
func Claimable(pod *corev1.Pod, project *tatarav1.Project, template string) bool {
	if owner := metav1.GetControllerOf(pod); owner == nil || owner.UID != project.UID ||
		pod.Annotations[AnnotationPoolTemplate] != template {
		return false
	}
	if pod.Labels[LabelPool] == "" || pod.Labels[LabelTask] != "" || !pod.DeletionTimestamp.IsZero() ||
		pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	if _, _, restarted := RestartedSidecar(pod); restarted {
		return false
	}
	for _, s := range pod.Status.InitContainerStatuses {
		done := s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
		if !done && (s.State.Running == nil || s.Started == nil || !*s.Started) {
			return false
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// RestartedSidecar names a sidecar (a restartable init container) of a running or pending pod
// that has restarted, with its restart count: while it was down, the agent could have taken its
// port, so the pod serves no Task.
func RestartedSidecar(pod *corev1.Pod) (name string, restarts int32, ok bool) {
	if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
		return "", 0, false
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.RestartCount > 0 && isSidecar(pod, s.Name) {
			return s.Name, s.RestartCount, true
		}
	}
	return "", 0, false
}

func isSidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// ClaimPoolPod turns pool pod into task's pod: the Task becomes its only controller and owner
// (the pod goes when the Task does, never back to the pool), it gets the Task's labels and the
// claim's time (claim.AnnotationClaimedAt), and its active deadline becomes the Project's, counted
// from now. The caller patches it with an
// optimistic lock, so two Tasks never claim one pod.
func ClaimPoolPod(pod *corev1.Pod, task *tatarav1.Task, project *tatarav1.Project, now metav1.Time) {
	for k, v := range Labels(task) {
		pod.Labels[k] = v
	}
	pod.OwnerReferences = []metav1.OwnerReference{OwnerReference(task)}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[claim.AnnotationClaimedAt] = now.UTC().Format(time.RFC3339Nano)
	deadline := ActiveDeadlineSeconds(project)
	if pod.Status.StartTime != nil {
		deadline += int64(now.Sub(pod.Status.StartTime.Time).Seconds()) + 1
	}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
}

// AuthorName and AuthorEmail are the git identity of a Task's agent in its checkout.
func AuthorName(task *tatarav1.Task) string { return "Tatara agent (" + task.Name + ")" }

// AuthorEmail is the agent's git email: an address under .invalid, which no mail reaches.
func AuthorEmail(task *tatarav1.Task) string {
	return task.Name + "@" + task.Spec.ProjectRef.Name + ".tasks.tatara.invalid"
}

// Assignment is what a claimed pool pod learns of its Task: what a Task's own pod has in its env
// and workspace-init's arguments, the token aside.
func Assignment(task *tatarav1.Task, project *tatarav1.Project) claim.Assignment {
	a := claim.Assignment{
		Project: project.Name, Task: task.Name, Kind: string(task.Spec.Kind), Directive: task.Spec.Directive,
	}
	if repo := project.Repo(task.Spec.Repo); repo != nil {
		a.RepoDir = RepoDir(repo.Name)
		a.AuthorName, a.AuthorEmail = AuthorName(task), AuthorEmail(task)
		if repo.Push != nil {
			a.PushBranch = PushBranch(task)
		}
		if ref := RefToFetch(task, repo); ref != "" {
			a.Ref, a.Depth, a.TimeoutSeconds = ref, cloneDepth(project), cloneTimeoutSeconds(project)
		}
	}
	return a
}

// RefToFetch is the ref a pool pod claimed by task must fetch before its agent starts: the
// Task's own when it is not the pool's checkout (the repo's default branch), else "". Only a pod
// with a git gateway (the repo has push configured) can fetch after its clone: the gateway holds
// a credential once the pod is claimed, while the read credential went with workspace-init.
func RefToFetch(task *tatarav1.Task, repo *tatarav1.ProjectRepo) string {
	if task.Spec.Ref == "" || task.Spec.Ref == repo.DefaultBranch {
		return ""
	}
	return task.Spec.Ref
}

// claimVolumes are a pool pod's claim directory (written by the cli, read by the wrapper and the
// gateway) and the cli's pod-bound ServiceAccount token for the claim endpoint; the returned mount
// is the main container's, read-only.
func claimVolumes() ([]corev1.Volume, corev1.VolumeMount) {
	return []corev1.Volume{
		{Name: claimVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("2Mi")),
		}}},
		{Name: claimTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o440)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: claim.Audience, ExpirationSeconds: ptr.To(int64(claimTokenSeconds)), Path: claim.ServiceAccountTokenFile,
			}}},
		}}},
	}, corev1.VolumeMount{Name: claimVolume, MountPath: claim.Dir, ReadOnly: true}
}
