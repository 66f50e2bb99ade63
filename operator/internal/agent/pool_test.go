package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"tatara.dev/cli/pkg/claim"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/testkit/golden"
)

func implementPool() tatarav1.WarmPool {
	return tatarav1.WarmPool{Kind: tatarav1.KindImplement, Size: 2, Repo: "operator"}
}

// TestBuildPoolPodGolden pins the whole pool pod; run `make generate` after a deliberate change.
func TestBuildPoolPodGolden(t *testing.T) {
	project := workspaceProject()
	project.UID = "uid-p1"
	got, err := yaml.Marshal(BuildPoolPod(project, implementPool(), testConfig()))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "pool-implement-workspace.golden.yaml"), got)
}

// TestPoolPodNamesNoTask: before its claim a pool pod holds nothing of any Task: no name, token,
// directive or push branch, and no activeDeadlineSeconds (it would count the pool's idle time).
// Only the cli mounts the pod-bound token it claims with; the agent's container sees the claim
// directory read-only.
func TestPoolPodNamesNoTask(t *testing.T) {
	project := workspaceProject()
	pod := BuildPoolPod(project, implementPool(), testConfig())
	if pod.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("pool pod has activeDeadlineSeconds %d; want none before the claim", *pod.Spec.ActiveDeadlineSeconds)
	}
	if ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		t.Error("pool pod automounts the ServiceAccount token into every container")
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		for _, e := range c.Env {
			switch e.Name {
			case "TATARA_TASK", TokenEnv, "TATARA_DIRECTIVE", PushBranchEnv:
				t.Errorf("container %s has %s before any claim", c.Name, e.Name)
			}
		}
		for _, a := range c.Args {
			if strings.Contains(a, "--branch=") || strings.Contains(a, "--branch-prefix=") || strings.Contains(a, "--author-") {
				t.Errorf("container %s has Task argument %q before any claim", c.Name, a)
			}
		}
		switch c.Name {
		case CLIContainer, WrapperContainer:
			if v, _ := envValue(c.Env, claim.EnvFile); v != claim.File {
				t.Errorf("container %s: %s = %q, want %q", c.Name, claim.EnvFile, v, claim.File)
			}
		case GitGatewayContainer:
			if !slices.Contains(c.Args, "--claim-file="+claim.File) {
				t.Errorf("git-gateway args %q lack --claim-file=%s", c.Args, claim.File)
			}
		}
		_, tokenFileEnv := envValue(c.Env, claim.EnvOperatorTokenFile)
		mountsToken := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == claimTokenVolume })
		if isCLI := c.Name == CLIContainer; mountsToken != isCLI || (tokenFileEnv >= 0) != isCLI {
			t.Errorf("container %s: mounts the claim token %v, has its path %v; want both only in the cli", c.Name, mountsToken, tokenFileEnv >= 0)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == claimVolume && m.ReadOnly == (c.Name == CLIContainer) {
				t.Errorf("container %s mounts the claim directory read-only=%v; only the cli writes it", c.Name, m.ReadOnly)
			}
		}
	}
	var projected *corev1.ServiceAccountTokenProjection
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			projected = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if projected == nil || projected.Audience != claim.Audience {
		t.Fatalf("claim token projection = %+v, want audience %q", projected, claim.Audience)
	}
	if owner := metav1.GetControllerOf(pod); owner == nil || owner.Kind != "Project" || owner.Name != project.Name {
		t.Errorf("pool pod's controller = %+v, want Project %s", owner, project.Name)
	}
}

// TestPoolTemplateHashFollowsItsInputs: the hash changes with the images, the Project, the kind
// and the operator's version.
func TestPoolTemplateHashFollowsItsInputs(t *testing.T) {
	project, cfg := workspaceProject(), testConfig()
	base := BuildPoolPod(project, implementPool(), cfg).Annotations[AnnotationPoolTemplate]
	if again := BuildPoolPod(project, implementPool(), cfg).Annotations[AnnotationPoolTemplate]; again != base {
		t.Fatalf("hash is not stable: %s then %s", base, again)
	}
	newImage := testConfig()
	newImage.CLIImage = "tatara-cli:0.2.0"
	edited := workspaceProject()
	edited.Spec.Agent.ToolSearch = tatarav1.ToolSearchOn
	otherKind := implementPool()
	otherKind.Kind = tatarav1.KindReview
	upgraded := testConfig()
	upgraded.OperatorVersion = cfg.OperatorVersion + "-next"
	for name, pod := range map[string]*corev1.Pod{
		"cli image":        BuildPoolPod(project, implementPool(), newImage),
		"project edit":     BuildPoolPod(edited, implementPool(), cfg),
		"kind":             BuildPoolPod(project, otherKind, cfg),
		"operator version": BuildPoolPod(project, implementPool(), upgraded),
	} {
		if pod.Annotations[AnnotationPoolTemplate] == base {
			t.Errorf("%s: the template hash did not change", name)
		}
	}
}

func runningPoolPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := BuildPoolPod(workspaceProject(), implementPool(), testConfig())
	pod.Name = "tatara-pool-p1-implement-abcde"
	started := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started}
	for _, c := range pod.Spec.InitContainers {
		s := corev1.ContainerStatus{Name: c.Name, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if c.RestartPolicy == nil {
			s.Started = ptr.To(false)
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		}
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, s)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: WrapperContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return pod
}

func TestClaimable(t *testing.T) {
	type claimCase struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}
	tests := []claimCase{
		{"running, clone done", func(*corev1.Pod) {}, true},
		{"claimed", func(p *corev1.Pod) { p.Labels[LabelTask] = "t1" }, false},
		{"not a pool pod", func(p *corev1.Pod) { delete(p.Labels, LabelPool) }, false},
		{"deleting", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, false},
		{"pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, false},
		{"clone running", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}, false},
		{"clone failed", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].State.Terminated.ExitCode = 1
		}, false},
		{"agent container waiting", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
		}, false},
		{"another Project's", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "another-project" }, false},
		{"no controller", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }, false},
		{"built from an older template", func(p *corev1.Pod) { p.Annotations[AnnotationPoolTemplate] = "0123456789abcdef" }, false},
	}
	// Each sidecar that restarted, running again, makes the pod unclaimable.
	for i, c := range runningPoolPod(t).Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			tests = append(tests, claimCase{"sidecar " + c.Name + " restarted", func(p *corev1.Pod) { p.Status.InitContainerStatuses[i].RestartCount = 1 }, false})
		}
	}
	if len(tests) < 13 {
		t.Fatalf("the pool pod has %d sidecars, want the cli and the git gateway at least", len(tests)-11)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := runningPoolPod(t)
			if pod.Spec.InitContainers[0].Name != WorkspaceInitContainer {
				t.Fatalf("init container 0 is %s, want %s", pod.Spec.InitContainers[0].Name, WorkspaceInitContainer)
			}
			template := pod.Annotations[AnnotationPoolTemplate]
			tt.edit(pod)
			if got := Claimable(pod, workspaceProject(), template); got != tt.want {
				t.Errorf("Claimable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestClaimPoolPod: the claimed pod is the Task's alone, labelled like a Task's own pod, and its
// deadline is the Project's counted from the claim.
func TestClaimPoolPod(t *testing.T) {
	pod, task, project := runningPoolPod(t), testTask(tatarav1.KindImplement), workspaceProject()
	now := metav1.Now()
	ClaimPoolPod(pod, task, project, now)
	if owners := pod.OwnerReferences; len(owners) != 1 || owners[0].UID != task.UID || !ptr.Deref(owners[0].Controller, false) {
		t.Errorf("owners after the claim = %+v, want the Task alone, as controller", owners)
	}
	for k, v := range Labels(task) {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Labels[LabelPool] != string(tatarav1.KindImplement) {
		t.Errorf("the claimed pod lost its pool label")
	}
	if at, err := time.Parse(time.RFC3339Nano, pod.Annotations[claim.AnnotationClaimedAt]); err != nil || !at.Equal(now.Time) {
		t.Errorf("claimed-at annotation %q (%v), want the claim's time %s", pod.Annotations[claim.AnnotationClaimedAt], err, now.Time)
	}
	idle := int64(now.Sub(pod.Status.StartTime.Time).Seconds())
	if got, want := ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0), ActiveDeadlineSeconds(project)+idle; got < want || got > want+2 {
		t.Errorf("activeDeadlineSeconds = %d, want the Project's %d plus the %d s the pod waited", got, ActiveDeadlineSeconds(project), idle)
	}
}

// TestAssignmentMatchesTheColdPod: a claimed pod learns the same identity a Task's own pod has in
// its env and workspace-init's arguments.
func TestAssignmentMatchesTheColdPod(t *testing.T) {
	task, project := testTask(tatarav1.KindImplement), workspaceProject()
	a := Assignment(task, project)
	cold := BuildPod(task, project, testConfig())
	wrapper := container(t, cold, WrapperContainer)
	for env, got := range map[string]string{"TATARA_TASK": a.Task, "TATARA_PROJECT": a.Project, "TATARA_TASK_KIND": a.Kind,
		"TATARA_DIRECTIVE": a.Directive, PushBranchEnv: a.PushBranch} {
		if want, _ := envValue(wrapper.Env, env); got != want {
			t.Errorf("assignment's %s = %q, the cold pod's = %q", env, got, want)
		}
	}
	if a.RepoDir != wrapper.WorkingDir {
		t.Errorf("assignment's repo dir %q, the cold pod's working dir %q", a.RepoDir, wrapper.WorkingDir)
	}
	args := strings.Join(container(t, cold, WorkspaceInitContainer).Args, " ")
	for _, want := range []string{"--author-name=" + a.AuthorName, "--author-email=" + a.AuthorEmail, "--branch=" + a.PushBranch} {
		if !strings.Contains(args, want) {
			t.Errorf("workspace-init args %q lack %q", args, want)
		}
	}
	if err := a.Validate(); err != nil {
		t.Error(err)
	}
	if a.Ref != "" {
		t.Errorf("a Task on the default branch: assignment's ref %q, want none (the pool's checkout is it)", a.Ref)
	}
}

// TestAssignmentNamesARefThePoolLacks: a Task on another ref than the pool's checkout has the
// claimed pod fetch it, with the cold pod's depth and timeout; on the pool's own, nothing.
func TestAssignmentNamesARefThePoolLacks(t *testing.T) {
	depth := int32(5)
	tests := []struct {
		name, ref, defaultBranch, wantRef string
	}{
		{"the default branch", "main", "main", ""},
		{"no ref", "", "main", ""},
		{"another branch", "feature", "main", "feature"},
		{"a commit", strings.Repeat("ab", 20), "main", strings.Repeat("ab", 20)},
		{"the remote's default, unknown here", "main", "", "main"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, project := testTask(tatarav1.KindImplement), workspaceProject()
			task.Spec.Ref = tt.ref
			project.Spec.Repos[0].DefaultBranch = tt.defaultBranch
			project.Spec.Workspace = tatarav1.ProjectWorkspace{CloneDepth: &depth, TimeoutSeconds: 42}
			a := Assignment(task, project)
			if a.Ref != tt.wantRef {
				t.Fatalf("assignment's ref %q, want %q", a.Ref, tt.wantRef)
			}
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
			if tt.wantRef == "" {
				return
			}
			args := strings.Join(container(t, BuildPod(task, project, testConfig()), WorkspaceInitContainer).Args, " ")
			for _, want := range []string{"--ref=" + a.Ref, fmt.Sprintf("--depth=%d", a.Depth), fmt.Sprintf("--timeout=%ds", a.TimeoutSeconds)} {
				if !strings.Contains(args, want) {
					t.Errorf("the cold pod's workspace-init args %q lack %q", args, want)
				}
			}
		})
	}
}
