// Package agent builds the objects of one Task's agent: its token Secret and its pod.
// Everything here is a pure function of the Task, its Project and the operator's
// configuration, so the controller stays idempotent and the output is testable by golden files.
package agent

import (
	"path"

	corev1 "k8s.io/api/core/v1"
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
	// CLIImage and WrapperImage come from the runtime ConfigMaps (key "image").
	CLIImage     string
	WrapperImage string
}

// PodName is the deterministic name of a Task's agent pod.
func PodName(task string) string { return PodNamePrefix + task }

// SecretName is the deterministic name of a Task's token Secret.
func SecretName(task string) string { return PodNamePrefix + task + "-token" }

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

// Env returns the env both containers share, in the contract's order: the eight Tatara
// variables, TATARA_TOOL_PROFILE last of them, then project.spec.agent.extraEnvs. The order
// matters: the kubelet keeps the later of two same-named entries, so an extra can override
// the profile (docs/architecture.md, The agent pod).
func Env(task *tatarav1.Task, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "TATARA_PROJECT", Value: project.Name},
		{Name: "TATARA_TASK", Value: task.Name},
		{Name: "TATARA_TASK_KIND", Value: string(task.Spec.Kind)},
		{Name: "TATARA_OPERATOR_URL", Value: cfg.OperatorURL},
		{Name: "TATARA_MEMORY_URL", Value: cfg.MemoryURL},
		{Name: "TATARA_CHAT_URL", Value: cfg.ChatURL},
		{Name: "TATARA_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(task.Name)},
			Key:                  TokenKey,
		}}},
	}
	env = append(env, corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: ToolProfileForKind(task.Spec.Kind)})
	return append(env, project.Spec.Agent.ExtraEnvs...)
}

// wrapperEnv is Env with the wrapper's own variables inserted before the extras, so the
// extras stay last for the wrapper too.
func wrapperEnv(task *tatarav1.Task, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	common := Env(task, project, cfg)
	n := len(common) - len(project.Spec.Agent.ExtraEnvs)
	env := append([]corev1.EnvVar(nil), common[:n]...)
	env = append(env,
		corev1.EnvVar{Name: "TATARA_DIRECTIVE", Value: task.Spec.Directive},
		corev1.EnvVar{Name: "TATARA_AGENT_COMMAND", Value: AgentCommand(project)},
		// The root filesystem is read-only; the agent keeps its config under a writable HOME.
		corev1.EnvVar{Name: "HOME", Value: HomeDir},
		corev1.EnvVar{Name: ToolSearchEnv, Value: string(ToolSearch(project))},
	)
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
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	volumes := []corev1.Volume{
		{Name: "workspace", VolumeSource: emptyDir},
		{Name: "home", VolumeSource: emptyDir},
		{Name: "tmp", VolumeSource: emptyDir},
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
		VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	initContainers := []corev1.Container{cli}

	wrapperImage, wrapperCommand := cfg.WrapperImage, []string(nil) // the image's ENTRYPOINT
	if project.Spec.Agent.Image != "" {
		installed := path.Join(WrapperDir, "wrapper")
		volumes = append(volumes, corev1.Volume{Name: "tatara-bin", VolumeSource: emptyDir})
		initContainers = append(initContainers, corev1.Container{
			Name:            WrapperInstallContainer,
			Image:           cfg.WrapperImage,
			Command:         []string{WrapperImageCP, WrapperImageBinary, installed},
			SecurityContext: containerSecurityContext(),
			VolumeMounts:    []corev1.VolumeMount{{Name: "tatara-bin", MountPath: WrapperDir}},
		})
		wrapperMounts = append(wrapperMounts, corev1.VolumeMount{Name: "tatara-bin", MountPath: WrapperDir, ReadOnly: true})
		wrapperImage, wrapperCommand = project.Spec.Agent.Image, []string{installed}
	}

	wrapper := corev1.Container{
		Name:       WrapperContainer,
		Image:      wrapperImage,
		Command:    wrapperCommand,
		WorkingDir: WorkspaceDir,
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
		Resources:       project.Spec.Agent.Resources,
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
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: project.Spec.Agent.ServiceAccountName,
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

func intOrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }
