package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestEveryContainerIsBounded: every container of every pod shape (no agent image, an agent
// image, a workspace with push) has CPU and memory requests and a memory limit, so no container's
// memory escapes the node's accounting.
func TestEveryContainerIsBounded(t *testing.T) {
	withAgent := testProject()
	withAgent.Spec.Agent.Image = "stand-in-agent:1"
	for name, project := range map[string]*tatarav1.Project{
		"default": testProject(), "agent image": withAgent, "workspace and push": workspaceProject(),
	} {
		t.Run(name, func(t *testing.T) {
			pod := BuildPod(testTask(tatarav1.KindImplement), project, testConfig())
			for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
				r := c.Resources
				_, cpu := r.Requests[corev1.ResourceCPU]
				_, mem := r.Requests[corev1.ResourceMemory]
				_, memLimit := r.Limits[corev1.ResourceMemory]
				if !cpu || !mem || !memLimit {
					t.Errorf("container %s: requests %v, limits %v; want cpu and memory requests and a memory limit", c.Name, r.Requests, r.Limits)
				}
			}
		})
	}
}

// TestResourcesPrecedence: the runtime ConfigMaps' values win over the defaults, container by
// container, and the Project's spec.agent.resources win for the agent container.
func TestResourcesPrecedence(t *testing.T) {
	cfg := testConfig()
	cfg.Resources.CLI = requirements("20m", "48Mi", "128Mi")
	project := workspaceProject()
	pod := BuildPod(testTask(tatarav1.KindImplement), project, cfg)
	def := DefaultResources()
	for _, tc := range []struct {
		container string
		want      corev1.ResourceRequirements
	}{
		{CLIContainer, cfg.Resources.CLI},
		{GitGatewayContainer, def.GitGateway},
		{WorkspaceInitContainer, def.WorkspaceInit},
		{WrapperContainer, def.Agent},
	} {
		if got := container(t, pod, tc.container).Resources; !equalRequirements(got, tc.want) {
			t.Errorf("%s resources %v, want %v", tc.container, got, tc.want)
		}
	}
	// Without a repo, wrapper-install alone installs the wrapper, with its own resources.
	noRepo := testTask(tatarav1.KindImplement)
	noRepo.Spec.Repo = ""
	if got := container(t, BuildPod(noRepo, project, cfg), WrapperInstallContainer).Resources; !equalRequirements(got, def.WrapperInstall) {
		t.Errorf("%s resources %v, want %v", WrapperInstallContainer, got, def.WrapperInstall)
	}
	project.Spec.Agent.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}
	pod = BuildPod(testTask(tatarav1.KindImplement), project, cfg)
	want := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}
	if got := container(t, pod, WrapperContainer).Resources; !equalRequirements(got, want) {
		t.Errorf("agent resources %v, want the Project's memory limit and the default CPU request %v", got, want)
	}
}

func equalRequirements(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, q := range x {
			if p, ok := y[k]; !ok || p.Cmp(q) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// TestPodBoundsComeFromTheProject: activeDeadlineSeconds and every emptyDir's sizeLimit are set,
// from the Project where it sets them, else from the defaults.
func TestPodBoundsComeFromTheProject(t *testing.T) {
	set := workspaceProject()
	set.Spec.Agent.ActiveDeadlineSeconds = 600
	ws, home := resource.MustParse("3Gi"), resource.MustParse("500Mi")
	set.Spec.Agent.Storage = tatarav1.AgentStorage{Workspace: &ws, Home: &home}
	for _, tc := range []struct {
		name     string
		project  *tatarav1.Project
		deadline int64
		limits   map[string]string
	}{
		{"defaults", workspaceProject(), DefaultActiveDeadlineSeconds, map[string]string{
			"workspace": DefaultWorkspaceSizeLimit, "home": DefaultHomeSizeLimit, "tmp": DefaultTmpSizeLimit, "tatara-bin": WrapperBinSizeLimit}},
		{"from the Project", set, 600, map[string]string{
			"workspace": "3Gi", "home": "500Mi", "tmp": DefaultTmpSizeLimit, "tatara-bin": WrapperBinSizeLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := BuildPod(testTask(tatarav1.KindImplement), tc.project, testConfig())
			if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != tc.deadline {
				t.Errorf("activeDeadlineSeconds %v, want %d", d, tc.deadline)
			}
			for _, v := range pod.Spec.Volumes {
				if v.EmptyDir == nil {
					continue
				}
				if v.EmptyDir.SizeLimit == nil {
					t.Errorf("emptyDir %s has no sizeLimit", v.Name)
					continue
				}
				if want, ok := tc.limits[v.Name]; ok && v.EmptyDir.SizeLimit.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("emptyDir %s sizeLimit %s, want %s", v.Name, v.EmptyDir.SizeLimit.String(), want)
				}
			}
		})
	}
}

// TestCompleted: whatever is left out gets a value, and the result is always valid (no limit
// below its request).
func TestCompleted(t *testing.T) {
	def := requirements("100m", "512Mi", "4Gi")
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	tests := []struct {
		name string
		in   corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{"nothing set", corev1.ResourceRequirements{}, def},
		{"requests only: the default memory limit", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("memory", "4Gi")}},
		{"a request above the default limit raises the limit", corev1.ResourceRequirements{Requests: rl("memory", "8Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "8Gi"), Limits: rl("memory", "8Gi")}},
		{"limits only: requests left to the API server", corev1.ResourceRequirements{Limits: rl("memory", "256Mi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("memory", "256Mi")}},
		{"empty limits map", corev1.ResourceRequirements{Requests: rl("cpu", "10m", "memory", "32Mi"), Limits: rl()},
			corev1.ResourceRequirements{Requests: rl("cpu", "10m", "memory", "32Mi"), Limits: rl("memory", "4Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := completed(tt.in, def); !equalRequirements(got, tt.want) {
				t.Errorf("completed = %v, want %v", got, tt.want)
			}
		})
	}
}
