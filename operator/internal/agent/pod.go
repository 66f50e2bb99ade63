// Package agent builds the objects of one Task's agent: its token Secret and its pod.
// Everything here is a pure function of the Task, its Project and the operator's
// configuration, so the controller stays idempotent and the output is testable by golden files.
// The controller decides when: a Task becomes a pod in startAttempt (controller/attempts.go) or
// claims a warm one built by BuildPoolPod (claimWarm, controller/pool_claim.go); the Task's lifecycle
// is told in controller/task_controller.go.
package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Names, ports and paths the wrapper's and the cli's defaults agree with (docs/architecture.md,
// The agent pod; the chart and e2e tests exercise them on real pods).
const (
	PodNamePrefix = "tatara-agent-"
	// TokenKey is the Secret key holding the Task's API token.
	TokenKey = "token"

	WrapperContainer        = agentpod.WrapperContainer
	CLIContainer            = agentpod.CLIContainer
	WrapperInstallContainer = agentpod.WrapperInstallContainer
	WorkspaceInitContainer  = agentpod.WorkspaceInitContainer
	GitGatewayContainer     = agentpod.GitGatewayContainer
	ModelGatewayContainer   = agentpod.ModelGatewayContainer

	WrapperMetricsPort = agentpod.WrapperMetricsPort
	CLIMetricsPort     = agentpod.CLIMetricsPort
	MCPListen          = agentpod.MCPListen

	// DefaultAgentCommand is the agent CLI on the wrapper image's PATH, without an agent image.
	DefaultAgentCommand = "claude"
	// DefaultBinaryPath is the agent binary's path inside project.spec.agent.image.
	DefaultBinaryPath = "/agent"
	// WrapperImageBinary is the wrapper's path in the wrapper image; with an agent image, the
	// pod's first init container (workspace-init, or wrapper-install without a repo) copies it to
	// InstalledWrapper, in WrapperDir.
	WrapperImageBinary = "/usr/local/bin/wrapper"
	WrapperDir         = "/opt/tatara"
	InstalledWrapper   = WrapperDir + "/wrapper"

	WorkspaceDir = "/workspace"
	HomeDir      = "/home/agent"

	// CredentialsDir is where workspace-init, and only it, mounts the repo's credentials Secret;
	// PushCredentialsDir is where the git-gateway sidecar, and only it, mounts the push Secret.
	CredentialsDir     = "/var/run/tatara/git-credentials"
	PushCredentialsDir = "/var/run/tatara/git-push"
	// GitGatewayListen is the gateway's address inside the pod; the agent's origin remote is
	// GitGatewayURL. GitGatewayHealthPort serves its /healthz and /metrics.
	GitGatewayListen     = agentpod.GitGatewayListen
	GitGatewayURL        = agentpod.GitGatewayURL
	GitGatewayHealthPort = agentpod.GitGatewayHealthPort
	// ModelCredentialsDir is where the model-gateway sidecar, and only it, mounts the model
	// credential (ModelCredentialFile in it). ModelGatewayMetricsPort serves its /healthz and
	// /metrics.
	ModelCredentialsDir     = "/var/run/tatara/model"
	ModelCredentialFile     = "credential"
	ModelGatewayMetricsPort = agentpod.ModelGatewayMetricsPort
	ModelGatewayListen      = agentpod.ModelGatewayListen
	// PushBranchEnv tells the agent the branch its pushes must go to.
	PushBranchEnv = "TATARA_PUSH_BRANCH"

	// DefaultCloneDepth and DefaultCloneTimeoutSeconds apply when the Project leaves them unset.
	DefaultCloneDepth          = 1
	DefaultCloneTimeoutSeconds = 300

	// NonRootUID is the uid/gid both containers run as (restricted Pod Security Standard).
	NonRootUID int64 = 65532
)

// Labels put on every object the operator makes for a Task.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelName      = "app.kubernetes.io/name"
	LabelTask      = "tatara.dev/task"
	LabelProject   = "tatara.dev/project"
	LabelKind      = "tatara.dev/kind"

	ManagedByValue = "tatara-operator"
	AgentNameValue = "tatara-agent"
)

// Config is the operator-wide input of the pod builder.
type Config struct {
	// OperatorURL, MemoryURL and ChatURL are the backends the cli reaches.
	OperatorURL string
	MemoryURL   string
	ChatURL     string
	// OperatorCABundle is the PEM CA the cli trusts, alone, for OperatorURL
	// (OperatorCABundleEnv); "" when the REST API is plain HTTP or needs no CA of its own.
	OperatorCABundle string
	// CLIImage and WrapperImage come from the runtime ConfigMaps (key "image").
	CLIImage     string
	WrapperImage string
	// Resources come from the runtime ConfigMaps too; a container left empty gets
	// DefaultResources'.
	Resources Resources
	// CLIScrapeInterval and WrapperScrapeInterval are how often Prometheus scrapes each
	// container (the runtime ConfigMaps' metricsScrapeInterval); 0 when monitoring is off.
	CLIScrapeInterval     time.Duration
	WrapperScrapeInterval time.Duration
	// ModelGateway is true when the cli image has `tatara model-gateway`
	// (agentpod.FeatureModelGateway in its runtime ConfigMap): only then can a Project with
	// spec.agent.model get pods.
	ModelGateway bool
	// ClaimFetchesRef is true when the cli and the wrapper images both handle a claim's ref
	// (agentpod.FeatureClaimRef in both runtime ConfigMaps): only then may a Task on another ref than a
	// pool's checkout claim a pool pod.
	ClaimFetchesRef bool
	// RecordInternalIssues is the cli runtime ConfigMap's RecordInternalIssuesKey: the cli sends
	// each report_internal_issue report to the operator's record (RecordInternalIssuesEnv).
	RecordInternalIssues bool
	// OperatorVersion is the version of the operator building the pod. It is not in the pod, but
	// in a pool pod's template hash: a new operator replaces the pool pods an older one built.
	OperatorVersion string
}

// BuildPod returns the Task's agent pod: the wrapper as main container, the cli as a native
// sidecar (an init container with restartPolicy Always, so it starts first and is stopped
// after the wrapper exits). When the Project names an agent image, the main container runs
// that image, so the agent has its own runtime (libc, shell, git, ...), and the first init
// container copies the static wrapper from the wrapper image into a shared emptyDir for it to run.
func BuildPod(task *tatarav1.Task, project *tatarav1.Project, cfg Config) *corev1.Pod {
	pod := buildPod(target{task: task, kind: task.Spec.Kind, repo: task.Spec.Repo, ref: task.Spec.Ref}, project, cfg)
	pod.Name = PodName(task.Name)
	pod.Labels = Labels(task)
	pod.OwnerReferences = []metav1.OwnerReference{OwnerReference(task)}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(ActiveDeadlineSeconds(project))
	return pod
}

// target is what a pod is built for: one Task (a cold pod), or, with task nil, a warm pool's
// kind and repo (a pool pod, which learns its Task when one claims it).
type target struct {
	task *tatarav1.Task
	kind tatarav1.TaskKind
	// repo is the spec.repos[] name to clone ("" for none), at ref ("" for its default branch).
	repo, ref string
}

func (t target) pool() bool { return t.task == nil }

// buildPod is the pod of t without its name, labels, owner and deadline, which differ between a
// Task's pod and a pool pod.
func buildPod(t target, project *tatarav1.Project, cfg Config) *corev1.Pod {
	res := cfg.Resources.withDefaults()
	if !isEmpty(project.Spec.Agent.Resources) {
		res.Agent = completed(project.Spec.Agent.Resources, DefaultResources().Agent)
	}
	volumes, mounts := scratchVolumes(StorageLimits(project))
	main := mainContainer{image: cfg.WrapperImage, mounts: mounts, workingDir: WorkspaceDir}
	if t.pool() {
		vols, claimMount := claimVolumes()
		volumes = append(volumes, vols...)
		main.mounts = append(main.mounts, claimMount)
	}
	var initContainers []corev1.Container
	installWrapper := project.Spec.Agent.Image != ""
	if installWrapper {
		volumes = append(volumes, main.runInAgentImage(project.Spec.Agent.Image))
	}

	// The workspace is cloned before the cli starts: a Task whose repo cannot be cloned fails
	// without starting anything of the agent's. The clone runs in the wrapper image (it has git),
	// which also installs the wrapper for an agent image: one init container, since each costs a
	// container start and the kubelet's noticing its exit (up to a second: its relist period).
	repo := project.Repo(t.repo)
	switch {
	case repo != nil:
		main.workingDir = RepoDir(repo.Name)
		c, vols := workspaceInit(t, project, repo, cfg.WrapperImage, installWrapper)
		c.Resources = res.WorkspaceInit
		initContainers = append(initContainers, c)
		volumes = append(volumes, vols...)
	case installWrapper:
		c := wrapperInstall(cfg.WrapperImage)
		c.Resources = res.WrapperInstall
		initContainers = append(initContainers, c)
	}
	initContainers = append(initContainers, cliContainer(t, project, cfg, res.CLI))
	if repo != nil && repo.Push != nil {
		c, vol := gitGateway(t, repo, cfg)
		c.Resources = res.GitGateway
		initContainers = append(initContainers, c)
		volumes = append(volumes, vol)
	}
	if m := project.Spec.Agent.Model; m != nil {
		c, vol := modelGateway(t, project, m, cfg)
		c.Resources = res.ModelGateway
		initContainers = append(initContainers, c)
		volumes = append(volumes, vol)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: project.Namespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(GracePeriodSeconds(cfg)),
			ServiceAccountName:            project.Spec.Agent.ServiceAccountName,
			RuntimeClassName:              runtimeClassName(project),
			// The agent talks to the operator with its Task token, never to the kube API.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              podSecurityContext(),
			InitContainers:               initContainers,
			Containers:                   []corev1.Container{main.container(wrapperEnv(t, project, cfg), res.Agent)},
			Volumes:                      volumes,
		},
	}
	withEgressProxy(&pod.Spec, egressProxyEnv(project, cfg))
	return pod
}

// emptyDir is a scratch volume of at most limit.
func emptyDir(limit resource.Quantity) corev1.VolumeSource {
	return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}
}

// scratchVolumes are the agent's writable directories (workspace, home, /tmp), each an emptyDir
// bounded by the Project's storage limits, and their mounts in the main container.
func scratchVolumes(storage Storage) ([]corev1.Volume, []corev1.VolumeMount) {
	return []corev1.Volume{
			{Name: "workspace", VolumeSource: emptyDir(storage.Workspace)},
			{Name: "home", VolumeSource: emptyDir(storage.Home)},
			{Name: "tmp", VolumeSource: emptyDir(storage.Tmp)},
		}, []corev1.VolumeMount{
			{Name: "workspace", MountPath: WorkspaceDir},
			{Name: "home", MountPath: HomeDir},
			{Name: "tmp", MountPath: "/tmp"},
		}
}

func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(NonRootUID),
		RunAsGroup:     ptr.To(NonRootUID),
		FSGroup:        ptr.To(NonRootUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
