package agent

import (
	corev1 "k8s.io/api/core/v1"

	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// ToolProfileForKind is the cli tool profile of a Task kind (TATARA_TOOL_PROFILE): the cli
// catalog's table, profiles.ForKind. An unknown kind yields "" and the cli then fails open;
// healthCheck Tasks are kind brainstorm and share its profile.
func ToolProfileForKind(kind tatarav1.TaskKind) string { return profiles.ForKind(string(kind)) }

// TokenEnv is the cli's variable for the Task token; only the cli container gets it.
const TokenEnv = "TATARA_TOKEN"

// OperatorCABundleEnv is the cli's variable for the REST API's CA (PEM). It is public, but only
// the cli calls the operator, so only the cli container gets it. An env var rather than a mounted
// Secret: the CA's Secret is in the operator's namespace, not the Task's.
const OperatorCABundleEnv = "TATARA_OPERATOR_CA_BUNDLE"

// RecordInternalIssuesEnv, "true", has the cli send each report_internal_issue report to the
// operator's record (the cli chart's internalIssues.record); only the cli container gets it.
const RecordInternalIssuesEnv = "TATARA_RECORD_INTERNAL_ISSUES"

// Env returns the cli container's env, in the contract's order: the eight Tatara variables (with
// TATARA_OPERATOR_CA_BUNDLE after the token when the operator has a CA, and
// TATARA_RECORD_INTERNAL_ISSUES after them when the cli chart turns recording on), TATARA_TOOL_PROFILE
// last of them, then project.spec.agent.extraEnvs. The order matters: the kubelet keeps the later
// of two same-named entries, so an extra can override the profile (docs/architecture.md, The agent
// pod). TATARA_TOKEN is a secretKeyRef to the Task's token Secret; the wrapper container, where
// the agent runs, gets the same env without it and without the CA bundle.
func Env(task *tatarav1.Task, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	return env(target{task: task, kind: task.Spec.Kind}, project, cfg)
}

// env is Env for a Task's pod or a pool pod. A pool pod has neither TATARA_TASK nor the token:
// it gets TATARA_CLAIM_FILE, and the cli the path of the pod-bound token it claims with, in their
// places (the cli receives the Task and its token with the claim).
func env(t target, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: "TATARA_PROJECT", Value: project.Name}}
	if !t.pool() {
		env = append(env, corev1.EnvVar{Name: "TATARA_TASK", Value: t.task.Name})
	}
	env = append(env,
		corev1.EnvVar{Name: "TATARA_TASK_KIND", Value: string(t.kind)},
		corev1.EnvVar{Name: "TATARA_OPERATOR_URL", Value: cfg.OperatorURL},
		corev1.EnvVar{Name: "TATARA_MEMORY_URL", Value: cfg.MemoryURL},
		corev1.EnvVar{Name: "TATARA_CHAT_URL", Value: cfg.ChatURL},
	)
	if t.pool() {
		env = append(env,
			corev1.EnvVar{Name: claim.EnvFile, Value: claim.File},
			corev1.EnvVar{Name: claim.EnvOperatorTokenFile, Value: claim.ServiceAccountTokenDir + "/" + claim.ServiceAccountTokenFile})
	} else {
		env = append(env, corev1.EnvVar{Name: TokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(t.task.Name)},
			Key:                  TokenKey,
		}}})
	}
	if cfg.OperatorCABundle != "" {
		env = append(env, corev1.EnvVar{Name: OperatorCABundleEnv, Value: cfg.OperatorCABundle})
	}
	if cfg.RecordInternalIssues {
		env = append(env, corev1.EnvVar{Name: RecordInternalIssuesEnv, Value: "true"})
	}
	env = append(env, corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: ToolProfileForKind(t.kind)})
	return append(env, project.Spec.Agent.ExtraEnvs...)
}

// wrapperEnv is Env without TATARA_TOKEN, the CA bundle and the cli's recording switch, with the wrapper's own variables
// inserted before the extras, so the extras stay last for the wrapper too. The agent runs
// arbitrary code in the wrapper's container and can read the wrapper's /proc/<pid>/environ: the
// token stays in the cli sidecar, which makes the agent's operator calls for it.
func wrapperEnv(t target, project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	common := env(t, project, cfg)
	n := len(common) - len(project.Spec.Agent.ExtraEnvs)
	env := make([]corev1.EnvVar, 0, len(common)+5)
	for _, e := range common[:n] {
		if e.Name != TokenEnv && e.Name != OperatorCABundleEnv && e.Name != RecordInternalIssuesEnv && e.Name != claim.EnvOperatorTokenFile {
			env = append(env, e)
		}
	}
	if w := ScrapeWait(cfg.WrapperScrapeInterval); w > 0 {
		env = append(env, corev1.EnvVar{Name: WrapperScrapeWaitEnv, Value: w.String()})
	}
	if !t.pool() {
		env = append(env, corev1.EnvVar{Name: "TATARA_DIRECTIVE", Value: t.task.Spec.Directive})
	}
	env = append(env,
		corev1.EnvVar{Name: "TATARA_AGENT_COMMAND", Value: AgentCommand(project)},
		// The root filesystem is read-only; the agent keeps its config under a writable HOME.
		corev1.EnvVar{Name: "HOME", Value: HomeDir},
		corev1.EnvVar{Name: ToolSearchEnv, Value: string(ToolSearch(project))},
	)
	if repo := project.Repo(t.repo); !t.pool() && repo != nil && repo.Push != nil {
		env = append(env, corev1.EnvVar{Name: PushBranchEnv, Value: PushBranch(t.task)})
	}
	if project.Spec.Agent.Model != nil {
		// The agent CLI reaches the model API through the model gateway, which adds the
		// credential and drops whatever the agent sends: the placeholder only satisfies the CLI,
		// which will not start without a key.
		env = append(env,
			corev1.EnvVar{Name: ModelBaseURLEnv, Value: agentpod.ModelGatewayURL},
			corev1.EnvVar{Name: ModelAPIKeyEnv, Value: ModelAPIKeyPlaceholder})
	}
	return append(env, common[n:]...)
}

// The agent CLI's model API variables. ModelAPIKeyPlaceholder is no credential: the model gateway
// replaces it with the Project's.
const (
	ModelBaseURLEnv        = "ANTHROPIC_BASE_URL"
	ModelAPIKeyEnv         = "ANTHROPIC_API_KEY"
	ModelAPIKeyPlaceholder = "no-key-here-the-model-gateway-adds-it"
)

// ModelCredentialEnvs are the variables through which the agent CLI takes a model credential:
// a Project that sets one in extraEnvs gives it to the agent (ProjectConditionModelKeyVisible).
var ModelCredentialEnvs = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

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
