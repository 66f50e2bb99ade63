package agent

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/claim"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

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

// cliContainer is the cli native sidecar: `tatara mcp` serving the agent's tools, with the Task
// token. In a pool pod it first waits for the claim, with the pod-bound token only it mounts.
func cliContainer(t target, project *tatarav1.Project, cfg Config, resources corev1.ResourceRequirements) corev1.Container {
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	if t.pool() {
		mounts = append(mounts,
			corev1.VolumeMount{Name: claimVolume, MountPath: claim.Dir},
			corev1.VolumeMount{Name: claimTokenVolume, MountPath: claim.ServiceAccountTokenDir, ReadOnly: true})
	}
	return corev1.Container{
		Name:          CLIContainer,
		Image:         cfg.CLIImage,
		Command:       []string{"tatara"},
		Args:          cliArgs(cfg),
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:           env(t, project, cfg),
		Ports:         []corev1.ContainerPort{{Name: "cli-metrics", ContainerPort: CLIMetricsPort, Protocol: corev1.ProtocolTCP}},
		// No startup probe: the kubelet starts the containers after it at once, and the wrapper
		// starts the agent only once the cli's MCP port accepts a connection (its --mcp-wait). A
		// probe held the wrapper's start back by up to its 1 s period, plus the kubelet's relist.
		SecurityContext: containerSecurityContext(),
		Resources:       resources,
		VolumeMounts:    mounts,
	}
}

// cliArgs runs `tatara mcp` on the pod's MCP and metrics ports; with monitoring on, it waits for
// a final scrape before it exits.
func cliArgs(cfg Config) []string {
	args := []string{"mcp", "--transport", "http", "--listen", MCPListen, "--metrics-addr", fmt.Sprintf(":%d", CLIMetricsPort)}
	if w := ScrapeWait(cfg.CLIScrapeInterval); w > 0 {
		args = append(args, "--scrape-wait", w.String())
	}
	return args
}

// workspaceInit is the init container that clones the Task's repo into the workspace with the
// wrapper's `workspace-init`, in the wrapper image (it has git), and, with installWrapper, first
// copies the wrapper for the agent image's container (the tatara-bin volume). It alone mounts the
// repo's credentials and a private scratch dir (git's HOME, the ssh key's copy), so only our image's
// git ever handles the read credential; on failure it writes the classified reason to its
// termination message, which the controller turns into the Task's WorkspaceFailed condition.
//
// A pool pod's clone names no Task: the wrapper sets the author and switches to the push branch
// once a Task has claimed the pod.
func workspaceInit(t target, project *tatarav1.Project, repo *tatarav1.ProjectRepo, wrapperImage string, installWrapper bool) (corev1.Container, []corev1.Volume) {
	ref := t.ref
	if ref == "" {
		ref = repo.DefaultBranch
	}
	depth, timeout := cloneDepth(project), cloneTimeoutSeconds(project)
	args := []string{
		"workspace-init",
		"--url=" + repo.URL,
		"--ref=" + ref,
		fmt.Sprintf("--depth=%d", depth),
		fmt.Sprintf("--timeout=%ds", timeout),
		"--dir=" + RepoDir(repo.Name),
		"--scratch-dir=/tmp",
	}
	if !t.pool() {
		args = append(args, "--author-name="+AuthorName(t.task), "--author-email="+AuthorEmail(t.task))
	}
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: WorkspaceDir},
		{Name: "workspace-scratch", MountPath: "/tmp"},
	}
	if installWrapper {
		args = append(args, "--install-to="+InstalledWrapper)
		mounts = append(mounts, wrapperBinMount(false))
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
		args = append(args, "--push-url="+GitGatewayURL)
		if !t.pool() {
			args = append(args, "--branch="+PushBranch(t.task))
		}
	}
	return corev1.Container{
		Name:                     WorkspaceInitContainer,
		Image:                    wrapperImage,
		Command:                  []string{WrapperImageBinary},
		Args:                     args,
		WorkingDir:               "/tmp",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurityContext(),
		VolumeMounts:             mounts,
	}, volumes
}

// cloneDepth is the number of commits a Task's checkout fetches (0: all).
func cloneDepth(project *tatarav1.Project) int32 {
	if d := project.Spec.Workspace.CloneDepth; d != nil {
		return *d
	}
	return DefaultCloneDepth
}

// cloneTimeoutSeconds bounds a Task's clone, or a claimed pool pod's fetch of its ref.
func cloneTimeoutSeconds(project *tatarav1.Project) int32 {
	if t := project.Spec.Workspace.TimeoutSeconds; t > 0 {
		return t
	}
	return DefaultCloneTimeoutSeconds
}

// gitGateway is the native sidecar through which the agent pushes (`tatara git-gateway` from the
// cli image): it alone mounts the push credential and forwards only ref updates under the Task's
// branch to the repo's URL. In a pool pod it reads the branch from the claim, and refuses every
// request before it.
func gitGateway(t target, repo *tatarav1.ProjectRepo, cfg Config) (corev1.Container, corev1.Volume) {
	branch := "--claim-file=" + claim.File
	mounts := []corev1.VolumeMount{{Name: "git-push", MountPath: PushCredentialsDir, ReadOnly: true}}
	if t.pool() {
		mounts = append(mounts, corev1.VolumeMount{Name: claimVolume, MountPath: claim.Dir, ReadOnly: true})
	} else {
		branch = "--branch-prefix=" + PushBranch(t.task)
	}
	return corev1.Container{
			Name:    GitGatewayContainer,
			Image:   cfg.CLIImage,
			Command: []string{"tatara"},
			Args: []string{
				"git-gateway",
				"--listen=" + GitGatewayListen,
				"--upstream=" + repo.URL,
				"--token-file=" + path.Join(PushCredentialsDir, "token"),
				branch,
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
			VolumeMounts:    mounts,
		}, corev1.Volume{Name: "git-push", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: repo.Push.SecretName, DefaultMode: ptr.To(int32(0o440)),
		}}}
}

// modelGateway is the native sidecar through which the agent CLI reaches the model API (`tatara
// model-gateway` from the cli image): it alone mounts the model credential (only its key of the
// Secret), adds it to the agent's requests, meters their tokens into its termination message,
// which the operator records in the Task's status, and refuses requests past the Task's budget.
// The budget counts the tokens earlier attempts used. In a pool pod it refuses every request
// before the claim: nothing is metered for a pod that serves no Task yet.
func modelGateway(t target, project *tatarav1.Project, m *tatarav1.AgentModel, cfg Config) (corev1.Container, corev1.Volume) {
	scheme := m.AuthScheme
	if scheme == "" {
		scheme = tatarav1.ModelAuthAPIKey
	}
	key := m.SecretKey
	if key == "" {
		key = DefaultModelSecretKey
	}
	args := []string{
		"model-gateway",
		"--listen=" + ModelGatewayListen,
		"--upstream=" + m.BaseURL,
		"--credential-file=" + path.Join(ModelCredentialsDir, ModelCredentialFile),
		"--auth-scheme=" + string(scheme),
		"--task-kind=" + string(t.kind),
		"--profile=" + ToolProfileForKind(t.kind),
		fmt.Sprintf("--token-budget=%d", m.TaskTokenBudget),
		"--usage-file=" + corev1.TerminationMessagePathDefault,
		fmt.Sprintf("--metrics-addr=:%d", ModelGatewayMetricsPort),
	}
	mounts := []corev1.VolumeMount{{Name: "model-credentials", MountPath: ModelCredentialsDir, ReadOnly: true}}
	if t.pool() {
		args = append(args, "--claim-file="+claim.File)
		mounts = append(mounts, corev1.VolumeMount{Name: claimVolume, MountPath: claim.Dir, ReadOnly: true})
	} else if u := t.task.Status.Usage; u != nil {
		args = append(args, fmt.Sprintf("--tokens-used=%d", u.Tokens))
	}
	return corev1.Container{
			Name:          ModelGatewayContainer,
			Image:         cfg.CLIImage,
			Command:       []string{"tatara"},
			Args:          args,
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports:         []corev1.ContainerPort{{Name: "model-metrics", ContainerPort: ModelGatewayMetricsPort, Protocol: corev1.ProtocolTCP}},
			// A readiness probe, not a startup probe, as for the git gateway: the agent CLI's
			// first model request comes after its own start, and a refused connection is retried.
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrPort(ModelGatewayMetricsPort)}},
				PeriodSeconds: 5,
			},
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext:          containerSecurityContext(),
			VolumeMounts:             mounts,
		}, corev1.Volume{Name: "model-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: m.SecretName, DefaultMode: ptr.To(int32(0o440)),
			Items: []corev1.KeyToPath{{Key: key, Path: ModelCredentialFile}},
		}}}
}

// DefaultModelSecretKey is the key of the model credential in spec.agent.model.secretName when
// the Project names none (the CRD's default).
const DefaultModelSecretKey = "api-key"

// runtimeClassName is the Project's sandboxed runtime (gVisor, Kata), or nil for the default.
func runtimeClassName(project *tatarav1.Project) *string {
	if project.Spec.Agent.RuntimeClassName == "" {
		return nil
	}
	return ptr.To(project.Spec.Agent.RuntimeClassName)
}

func intOrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// mainContainer is the pod's main container as BuildPod assembles it: the wrapper, run from the
// wrapper image or, with a Project agent image, from a copy installed into that image.
type mainContainer struct {
	image string
	// command is nil to run the image's ENTRYPOINT.
	command    []string
	mounts     []corev1.VolumeMount
	workingDir string
}

// wrapperBinVolume is the emptyDir the wrapper is installed into for an agent image's container.
const wrapperBinVolume = "tatara-bin"

func wrapperBinMount(readOnly bool) corev1.VolumeMount {
	return corev1.VolumeMount{Name: wrapperBinVolume, MountPath: WrapperDir, ReadOnly: readOnly}
}

// runInAgentImage makes the main container run agentImage with the wrapper that the pod's first
// init container installs into the returned volume (workspaceInit's --install-to, or
// wrapperInstall).
func (m *mainContainer) runInAgentImage(agentImage string) corev1.Volume {
	m.mounts = append(m.mounts, wrapperBinMount(true))
	m.image, m.command = agentImage, []string{InstalledWrapper}
	return corev1.Volume{Name: wrapperBinVolume, VolumeSource: emptyDir(resource.MustParse(WrapperBinSizeLimit))}
}

// wrapperInstall is the init container that only installs the wrapper for an agent image's
// container, in a pod without a repo to clone (with one, workspace-init does it).
func wrapperInstall(wrapperImage string) corev1.Container {
	return corev1.Container{
		Name:            WrapperInstallContainer,
		Image:           wrapperImage,
		Command:         []string{WrapperImageBinary, "install", InstalledWrapper},
		SecurityContext: containerSecurityContext(),
		VolumeMounts:    []corev1.VolumeMount{wrapperBinMount(false)},
	}
}

// container is the wrapper container with env and resources.
func (m mainContainer) container(env []corev1.EnvVar, resources corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{
		Name:       WrapperContainer,
		Image:      m.image,
		Command:    m.command,
		WorkingDir: m.workingDir,
		Env:        env,
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
		Resources:       resources,
		SecurityContext: containerSecurityContext(),
		VolumeMounts:    m.mounts,
	}
}
