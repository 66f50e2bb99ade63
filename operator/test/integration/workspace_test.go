package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/workspace"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// TestTaskRefIsImmutable: spec.ref shapes the agent's workspace, so it can be neither changed,
// added nor removed once the Task exists, and it needs a repo.
func TestTaskRefIsImmutable(t *testing.T) {
	ns := newNamespace(t)
	spec := func(ref string) tatarav1.TaskSpec {
		return tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Repo: "operator", Ref: ref, Directive: "d"}
	}
	with := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "with-ref", Namespace: ns}, Spec: spec("release-1.2")}
	without := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "without-ref", Namespace: ns}, Spec: spec("")}
	for _, task := range []*tatarav1.Task{with, without} {
		if err := k8s.Create(context.Background(), task); err != nil {
			t.Fatalf("create %s: %v", task.Name, err)
		}
	}
	tests := []struct {
		name  string
		task  *tatarav1.Task
		patch string
	}{
		{"changed", with, `{"spec":{"ref":"main"}}`},
		{"removed", with, `{"spec":{"ref":null}}`},
		{"added", without, `{"spec":{"ref":"main"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Patch(context.Background(), tt.task.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tt.patch)))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ref is immutable") {
				t.Fatalf("want the CRD to refuse with 'ref is immutable', got %v", err)
			}
		})
	}
	noRepo := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "ref-no-repo", Namespace: ns}, Spec: spec("main")}
	noRepo.Spec.Repo = ""
	if err := k8s.Create(context.Background(), noRepo); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ref needs repo") {
		t.Fatalf("want 'ref needs repo', got %v", err)
	}
	bad := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "ref-option", Namespace: ns}, Spec: spec("--upload-pack=sh")}
	if err := k8s.Create(context.Background(), bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ref") {
		t.Fatalf("a ref that git would read as an option must be refused, got %v", err)
	}
}

// TestProjectRepoRulesEnforcedByCRD: no credentials in a URL (they would land in the agent's
// .git/config), and push only over http(s), the git gateway's transport.
func TestProjectRepoRulesEnforcedByCRD(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		repo    tatarav1.ProjectRepo
		wantErr string
	}{
		{"token in the URL", tatarav1.ProjectRepo{Name: "r", URL: "https://user:ghp_secret@git.example.test/r.git"}, "must not carry credentials"},
		{"push over ssh", tatarav1.ProjectRepo{Name: "r", URL: "git@git.example.test:r.git", Push: &tatarav1.RepoPush{SecretName: "s"}}, "push needs an http(s) url"},
		{"ssh user is fine", tatarav1.ProjectRepo{Name: "r", URL: "ssh://git@git.example.test/r.git", Credentials: &tatarav1.RepoCredentials{SecretName: "k"}}, ""},
		{"https with both Secrets", tatarav1.ProjectRepo{Name: "r", URL: "https://git.example.test/r.git",
			Credentials: &tatarav1.RepoCredentials{SecretName: "read"}, Push: &tatarav1.RepoPush{SecretName: "push"}}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+i)), Namespace: ns},
				Spec: tatarav1.ProjectSpec{Repos: []tatarav1.ProjectRepo{tt.repo}}}
			err := k8s.Create(context.Background(), p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want %q, got %v", tt.wantErr, err)
			}
		})
	}
}

// TestWorkspaceFailureIsACondition: the kubelet's record of a failed workspace-init (its
// termination message) becomes the Task's WorkspaceFailed condition, and the Task fails.
func TestWorkspaceFailureIsACondition(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "clone-fails", "p", tatarav1.KindImplement)
	pod := waitPod(t, ns, task.Name)
	if pod.Spec.InitContainers[0].Name != agent.WorkspaceInitContainer {
		t.Fatalf("first init container %s, want %s (the Task names a repo)", pod.Spec.InitContainers[0].Name, agent.WorkspaceInitContainer)
	}

	msg := workspace.Failure{Reason: workspace.AuthFailed, Message: "git clone failed (exit status 128): fatal: Authentication failed for 'https://git.example.test/tatara/operator.git/'"}
	pod.Status.Phase = corev1.PodFailed
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: agent.WorkspaceInitContainer, Image: wrapperImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: string(msg.Encode())}},
	}}
	if err := k8s.Status().Update(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, task.Name, tatarav1.ReasonWorkspaceFailed)
	wf := meta.FindStatusCondition(got.Status.Conditions, tatarav1.ConditionWorkspaceFailed)
	if got.Status.Phase != tatarav1.PhaseFailed || wf == nil || wf.Status != metav1.ConditionTrue ||
		wf.Reason != workspace.AuthFailed || !strings.Contains(wf.Message, "Authentication failed") {
		t.Fatalf("phase %s, WorkspaceFailed %+v; want Failed and AuthFailed", got.Status.Phase, wf)
	}
}
