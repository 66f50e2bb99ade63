package agent

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// PodName is the deterministic name of a Task's agent pod.
func PodName(task string) string { return PodNamePrefix + task }

// SecretName is the deterministic name of a Task's token Secret.
func SecretName(task string) string { return PodNamePrefix + task + "-token" }

// RepoDir is where workspace-init clones a repo and the agent starts: /workspace/<repo>. Not
// /workspace itself: the emptyDir's root belongs to root, and git refuses to work in a repository
// whose top directory another user owns ("dubious ownership"); the directory git clone creates is
// the agent's.
func RepoDir(repo string) string { return path.Join(WorkspaceDir, repo) }

// PushBranch is the branch the agent of a Task's current attempt may push to (and branches under
// it): tatara/<task>-<the first 8 characters of the Task's UID>, and for a retry after a lost pod
// (attempt n > 1) that name with -attempt<n>. The UID makes it the branch of this Task object: a
// Task deleted and created again under the same name pushes to another branch, never over the
// earlier one's. The attempt fences a lost pod, which may still run on a node the cluster cannot
// reach with the push credential in its gateway: it can push only to its own attempt's branch,
// never to the branch of the retry, whose change is the one reviewed and reported.
func PushBranch(task *tatarav1.Task) string {
	uid := strings.ReplaceAll(string(task.UID), "-", "")
	branch := "tatara/" + task.Name + "-" + uid[:min(8, len(uid))]
	if a := task.Status.CurrentAttempt(); a != nil && a.Number > 1 {
		branch += fmt.Sprintf("-attempt%d", a.Number)
	}
	return branch
}

// Labels returns the labels of a Task's Secret and pod.
func Labels(task *tatarav1.Task) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelName:      AgentNameValue,
		LabelTask:      task.Name,
		LabelProject:   task.Spec.ProjectRef.Name,
		LabelKind:      string(task.Spec.Kind),
	}
}

// OwnerReference makes the Task the controlling owner, so its pod and Secret go with it.
func OwnerReference(task *tatarav1.Task) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         tatarav1.GroupVersion.String(),
		Kind:               "Task",
		Name:               task.Name,
		UID:                task.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// BuildSecret returns the Task's token Secret.
func BuildSecret(task *tatarav1.Task, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            SecretName(task.Name),
			Namespace:       task.Namespace,
			Labels:          Labels(task),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(task)},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{TokenKey: []byte(token)},
	}
}
