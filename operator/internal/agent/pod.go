// Package agent builds the objects of one Task's agent: its token Secret and its pod.
// Everything here is a pure function of the Task, its Project and the operator's
// configuration, so the controller stays idempotent and the output is testable by golden files.
package agent

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Names, ports and paths the wrapper's and the cli's defaults agree with (docs/architecture.md,
// The agent pod; the chart and e2e tests exercise them on real pods).
const (
	PodNamePrefix = "tatara-agent-"
	// TokenKey is the Secret key holding the Task's API token.
	TokenKey = "token"

	WrapperContainer        = "wrapper"
	CLIContainer            = "cli"
	WrapperInstallContainer = "wrapper-install"
	WorkspaceInitContainer  = "workspace-init"
	GitGatewayContainer     = "git-gateway"

	WrapperMetricsPort = 9090
	CLIMetricsPort     = 9091
	MCPListen          = "127.0.0.1:7777"

	// DefaultAgentCommand is the agent CLI on the wrapper image's PATH, without an agent image.
	DefaultAgentCommand = "claude"
	// DefaultBinaryPath is the agent binary's path inside project.spec.agent.image.
	DefaultBinaryPath = "/agent"
	// WrapperImageBinary is the wrapper's path in the wrapper image; with an agent image, the
	// wrapper-install init container copies it to WrapperDir/wrapper.
	WrapperImageBinary = "/usr/local/bin/wrapper"
	WrapperImageCP     = "/usr/local/bin/cp"
	WrapperDir         = "/opt/tatara"

	WorkspaceDir = "/workspace"
	HomeDir      = "/home/agent"

	// CredentialsDir is where workspace-init, and only it, mounts the repo's credentials Secret;
	// PushCredentialsDir is where the git-gateway sidecar, and only it, mounts the push Secret.
	CredentialsDir     = "/var/run/tatara/git-credentials"
	PushCredentialsDir = "/var/run/tatara/git-push"
	// GitGatewayListen is the gateway's address inside the pod; the agent's origin remote is
	// GitGatewayURL. GitGatewayHealthPort serves its /healthz and /metrics.
	GitGatewayListen     = "127.0.0.1:7778"
	GitGatewayURL        = "http://" + GitGatewayListen + "/"
	GitGatewayHealthPort = 9092
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
}

// PodName is the deterministic name of a Task's agent pod.
func PodName(task string) string { return PodNamePrefix + task }

// SecretName is the deterministic name of a Task's token Secret.
func SecretName(task string) string { return PodNamePrefix + task + "-token" }

// RepoDir is where workspace-init clones a repo and the agent starts: /workspace/<repo>. Not
// /workspace itself: the emptyDir's root belongs to root, and git refuses to work in a repository
// whose top directory another user owns ("dubious ownership"); the directory git clone creates is
// the agent's.
func RepoDir(repo string) string { return path.Join(WorkspaceDir, repo) }

// PushBranch is the branch a Task's agent may push to (and branches under it): tatara/<task>.
func PushBranch(task string) string { return "tatara/" + task }

// ToolProfileForKind is the cli tool profile of a Task kind (TATARA_TOOL_PROFILE): the cli
// catalog's table, profiles.ForKind. An unknown kind yields "" and the cli then fails open;
// healthCheck Tasks are kind brainstorm and share its profile.
func ToolProfileForKind(kind tatarav1.TaskKind) string { return profiles.ForKind(string(kind)) }

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

// TokenEnv is the cli's variable for the Task token; only the cli container gets it.
const TokenEnv = "TATARA_TOKEN"

// OperatorCABundleEnv is the cli's variable for the REST API's CA (PEM). It is public, but only
// the cli calls the operator, so only the cli container gets it. An env var rather than a mounted
// Secret: the CA's Secret is in the operator's namespace, not the Task's.
const OperatorCABundleEnv = "TATARA_OPERATOR_CA_BUNDLE"

// Env returns the cli container's env, in the contract's order: the eight Tatara variables (nine
// with TATARA_OPERATOR_CA_BUNDLE, after the token, when the operator has a CA), TATARA_TOOL_PROFILE
// last of them, then project.spec.agent.extraEnvs. The order matters: the kubelet keeps the later
// of two same-named entries, so an extra can override the profile (docs/architecture.md, The agent
// pod). TATARA_TOKEN is a secretKeyRef to the Task's token Secret; the wrapper container, where
// the agent runs, gets the same env without it and without the CA bundle.
func Env(task *tatarav1.Task, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "TATARA_PROJECT", Value: project.Name},
		{Name: "TATARA_TASK", Value: task.Name},
		{Name: "TATARA_TASK_KIND", Value: string(task.Spec.Kind)},
		{Name: "TATARA_OPERATOR_URL", Value: cfg.OperatorURL},
		{Name: "TATARA_MEMORY_URL", Value: cfg.MemoryURL},
		{Name: "TATARA_CHAT_URL", Value: cfg.ChatURL},
		{Name: TokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(task.Name)},
			Key:                  TokenKey,
		}}},
	}
	if cfg.OperatorCABundle != "" {
		env = append(env, corev1.EnvVar{Name: OperatorCABundleEnv, Value: cfg.OperatorCABundle})
	}
	env = append(env, corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: ToolProfileForKind(task.Spec.Kind)})
	return append(env, project.Spec.Agent.ExtraEnvs...)
}

// wrapperEnv is Env without TATARA_TOKEN and the CA bundle, with the wrapper's own variables
// inserted before the extras, so the extras stay last for the wrapper too. The agent runs
// arbitrary code in the wrapper's container and can read the wrapper's /proc/<pid>/environ: the
// token stays in the cli sidecar, which makes the agent's operator calls for it.
func wrapperEnv(task *tatarav1.Task, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	common := Env(task, project, cfg)
	n := len(common) - len(project.Spec.Agent.ExtraEnvs)
	env := make([]corev1.EnvVar, 0, len(common)+5)
	for _, e := range common[:n] {
		if e.Name != TokenEnv && e.Name != OperatorCABundleEnv {
			env = append(env, e)
		}
	}
	env = append(env,
		corev1.EnvVar{Name: "TATARA_DIRECTIVE", Value: task.Spec.Directive},
		corev1.EnvVar{Name: "TATARA_AGENT_COMMAND", Value: AgentCommand(project)},
		// The root filesystem is read-only; the agent keeps its config under a writable HOME.
		corev1.EnvVar{Name: "HOME", Value: HomeDir},
		corev1.EnvVar{Name: ToolSearchEnv, Value: string(ToolSearch(project))},
	)
	if repo := project.Repo(task.Spec.Repo); repo != nil && repo.Push != nil {
		env = append(env, corev1.EnvVar{Name: PushBranchEnv, Value: PushBranch(task.Name)})
	}
	return append(env, common[n:]...)
}

// ToolSearchEnv is the agent CLI's variable for its tool-search mode.
const ToolSearchEnv = "ENABLE_TOOL_SEARCH"

// ToolSearch is the Project's tool-search mode; unset (an object written before the field had a
// default) is ToolSearchOff.
func ToolSearch(project *tatarav1.Project) tatarav1.ToolSearchMode {
	if project.Spec.Agent.ToolSearch == "" {
		return tatarav1.ToolSearchOff
	}
	return project.Spec.Agent.ToolSearch
}

// AgentCommand is the agent binary the wrapper runs for this Project: its path inside the
// agent image, or `claude` on the wrapper image's PATH when the Project names no agent image.
func AgentCommand(project *tatarav1.Project) string {
	if project.Spec.Agent.Image == "" {
		return DefaultAgentCommand
	}
	if p := project.Spec.Agent.BinaryPath; p != "" {
		return p
	}
	return DefaultBinaryPath
}

// containerSecurityContext satisfies the restricted Pod Security Standard.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(NonRootUID),
		RunAsGroup:               ptr.To(NonRootUID),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// BuildPod returns the Task's agent pod: the wrapper as main container, the cli as a native
// sidecar (an init container with restartPolicy Always, so it starts first and is stopped
// after the wrapper exits). When the Project names an agent image, the main container runs
// that image, so the agent has its own runtime (libc, shell, git, ...), and an init container
// copies the static wrapper from the wrapper image into a shared emptyDir for it to run.
func BuildPod(task *tatarav1.Task, project *tatarav1.Project, cfg Config) *corev1.Pod {
	res := cfg.Resources.withDefaults()
	if !isEmpty(project.Spec.Agent.Resources) {
		res.Agent = completed(project.Spec.Agent.Resources, DefaultResources().Agent)
	}
	storage := StorageLimits(project)
	emptyDir := func(limit resource.Quantity) corev1.VolumeSource {
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}
	}
	volumes := []corev1.Volume{
		{Name: "workspace", VolumeSource: emptyDir(storage.Workspace)},
		{Name: "home", VolumeSource: emptyDir(storage.Home)},
		{Name: "tmp", VolumeSource: emptyDir(storage.Tmp)},
	}
	wrapperMounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: WorkspaceDir},
		{Name: "home", MountPath: HomeDir},
		{Name: "tmp", MountPath: "/tmp"},
	}

	cli := corev1.Container{
		Name:          CLIContainer,
		Image:         cfg.CLIImage,
		Command:       []string{"tatara"},
		Args:          []string{"mcp", "--transport", "http", "--listen", MCPListen, "--metrics-addr", ":9091"},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:           Env(task, project, cfg),
		Ports:         []corev1.ContainerPort{{Name: "cli-metrics", ContainerPort: CLIMetricsPort, Protocol: corev1.ProtocolTCP}},
		// The wrapper starts only once the cli's metrics port answers, i.e. the MCP server is up.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intOrPort(CLIMetricsPort)}},
			PeriodSeconds:    1,
			FailureThreshold: 60,
		},
		SecurityContext: containerSecurityContext(),
		Resources:       res.CLI,
		VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	wrapperImage, wrapperCommand := cfg.WrapperImage, []string(nil) // the image's ENTRYPOINT
	wrapperBinary := WrapperImageBinary
	var initContainers []corev1.Container
	if project.Spec.Agent.Image != "" {
		installed := path.Join(WrapperDir, "wrapper")
		volumes = append(volumes, corev1.Volume{Name: "tatara-bin", VolumeSource: emptyDir(resource.MustParse(WrapperBinSizeLimit))})
		initContainers = append(initContainers, corev1.Container{
			Name:            WrapperInstallContainer,
			Image:           cfg.WrapperImage,
			Command:         []string{WrapperImageCP, WrapperImageBinary, installed},
			SecurityContext: containerSecurityContext(),
			Resources:       res.WrapperInstall,
			VolumeMounts:    []corev1.VolumeMount{{Name: "tatara-bin", MountPath: WrapperDir}},
		})
		wrapperMounts = append(wrapperMounts, corev1.VolumeMount{Name: "tatara-bin", MountPath: WrapperDir, ReadOnly: true})
		wrapperImage, wrapperCommand, wrapperBinary = project.Spec.Agent.Image, []string{installed}, installed
	}

	// The workspace is cloned before the cli starts: a Task whose repo cannot be cloned fails
	// without starting anything of the agent's.
	repo := project.Repo(task.Spec.Repo)
	workingDir := WorkspaceDir
	if repo != nil {
		workingDir = RepoDir(repo.Name)
		c, vols := workspaceInit(task, project, repo, wrapperImage, wrapperBinary)
		c.Resources = res.WorkspaceInit
		initContainers = append(initContainers, c)
		volumes = append(volumes, vols...)
	}
	initContainers = append(initContainers, cli)
	if repo != nil && repo.Push != nil {
		c, vol := gitGateway(task, repo, cfg)
		c.Resources = res.GitGateway
		initContainers = append(initContainers, c)
		volumes = append(volumes, vol)
	}

	wrapper := corev1.Container{
		Name:       WrapperContainer,
		Image:      wrapperImage,
		Command:    wrapperCommand,
		WorkingDir: workingDir,
		Env:        wrapperEnv(task, project, cfg),
		Ports:      []corev1.ContainerPort{{Name: "metrics", ContainerPort: WrapperMetricsPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrPort(WrapperMetricsPort)}},
			PeriodSeconds:    10,
			FailureThreshold: 6,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intOrPort(WrapperMetricsPort)}},
			PeriodSeconds: 5,
		},
		Resources:       res.Agent,
		SecurityContext: containerSecurityContext(),
		VolumeMounts:    wrapperMounts,
	}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(task.Name),
			Namespace:       task.Namespace,
			Labels:          Labels(task),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(task)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:         corev1.RestartPolicyNever,
			ActiveDeadlineSeconds: ptr.To(ActiveDeadlineSeconds(project)),
			ServiceAccountName:    project.Spec.Agent.ServiceAccountName,
			RuntimeClassName:      runtimeClassName(project),
			// The agent talks to the operator with its Task token, never to the kube API.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To(NonRootUID),
				RunAsGroup:     ptr.To(NonRootUID),
				FSGroup:        ptr.To(NonRootUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: initContainers,
			Containers:     []corev1.Container{wrapper},
			Volumes:        volumes,
		},
	}
}

// workspaceInit is the init container that clones the Task's repo into the workspace with the
// wrapper's `workspace-init` (it needs git, so it runs in the agent image). It alone mounts the
// repo's credentials and a private scratch dir (git's HOME, the ssh key's copy); on failure it
// writes the classified reason to its termination message, which the controller turns into the
// Task's WorkspaceFailed condition.
func workspaceInit(task *tatarav1.Task, project *tatarav1.Project, repo *tatarav1.ProjectRepo, image, wrapperBinary string) (corev1.Container, []corev1.Volume) {
	ref := task.Spec.Ref
	if ref == "" {
		ref = repo.DefaultBranch
	}
	depth, timeout := int32(DefaultCloneDepth), int32(DefaultCloneTimeoutSeconds)
	if d := project.Spec.Workspace.CloneDepth; d != nil {
		depth = *d
	}
	if t := project.Spec.Workspace.TimeoutSeconds; t > 0 {
		timeout = t
	}
	args := []string{
		"workspace-init",
		"--url=" + repo.URL,
		"--ref=" + ref,
		fmt.Sprintf("--depth=%d", depth),
		fmt.Sprintf("--timeout=%ds", timeout),
		"--dir=" + RepoDir(repo.Name),
		"--scratch-dir=/tmp",
		"--author-name=Tatara agent (" + task.Name + ")",
		"--author-email=" + task.Name + "@" + project.Name + ".tasks.tatara.invalid",
	}
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: WorkspaceDir},
		{Name: "workspace-scratch", MountPath: "/tmp"},
	}
	if strings.HasPrefix(wrapperBinary, WrapperDir+"/") {
		mounts = append(mounts, corev1.VolumeMount{Name: "tatara-bin", MountPath: WrapperDir, ReadOnly: true})
	}
	volumes := []corev1.Volume{{Name: "workspace-scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi")),
	}}}}
	if repo.Credentials != nil {
		args = append(args, "--credentials-dir="+CredentialsDir, "--credentials-secret="+repo.Credentials.SecretName)
		mounts = append(mounts, corev1.VolumeMount{Name: "git-credentials", MountPath: CredentialsDir, ReadOnly: true})
		// Optional: a missing Secret is reported by workspace-init as CredentialsInvalid, naming
		// it, instead of a pod stuck on a failed mount.
		volumes = append(volumes, corev1.Volume{Name: "git-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: repo.Credentials.SecretName, DefaultMode: ptr.To(int32(0o440)), Optional: ptr.To(true),
		}}})
	}
	if repo.Push != nil {
		args = append(args, "--push-url="+GitGatewayURL, "--branch="+PushBranch(task.Name))
	}
	return corev1.Container{
		Name:                     WorkspaceInitContainer,
		Image:                    image,
		Command:                  []string{wrapperBinary},
		Args:                     args,
		WorkingDir:               "/tmp",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurityContext(),
		VolumeMounts:             mounts,
	}, volumes
}

// gitGateway is the native sidecar through which the agent pushes (`tatara git-gateway` from the
// cli image): it alone mounts the push credential and forwards only ref updates under the Task's
// branch to the repo's URL.
func gitGateway(task *tatarav1.Task, repo *tatarav1.ProjectRepo, cfg Config) (corev1.Container, corev1.Volume) {
	return corev1.Container{
			Name:    GitGatewayContainer,
			Image:   cfg.CLIImage,
			Command: []string{"tatara"},
			Args: []string{
				"git-gateway",
				"--listen=" + GitGatewayListen,
				"--upstream=" + repo.URL,
				"--token-file=" + path.Join(PushCredentialsDir, "token"),
				"--branch-prefix=" + PushBranch(task.Name),
				fmt.Sprintf("--metrics-addr=:%d", GitGatewayHealthPort),
			},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports:         []corev1.ContainerPort{{Name: "git-gw-metrics", ContainerPort: GitGatewayHealthPort, Protocol: corev1.ProtocolTCP}},
			// A readiness probe, not a startup probe: a native sidecar's startup probe holds back
			// every container after it, and the agent needs the gateway only when it pushes, long
			// after it started. Waiting for it cost 2 to 8 s of every start in e2e.
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrPort(GitGatewayHealthPort)}},
				PeriodSeconds: 5,
			},
			SecurityContext: containerSecurityContext(),
			VolumeMounts:    []corev1.VolumeMount{{Name: "git-push", MountPath: PushCredentialsDir, ReadOnly: true}},
		}, corev1.Volume{Name: "git-push", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: repo.Push.SecretName, DefaultMode: ptr.To(int32(0o440)),
		}}}
}

// runtimeClassName is the Project's sandboxed runtime (gVisor, Kata), or nil for the default.
func runtimeClassName(project *tatarav1.Project) *string {
	if project.Spec.Agent.RuntimeClassName == "" {
		return nil
	}
	return ptr.To(project.Spec.Agent.RuntimeClassName)
}

func intOrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }
