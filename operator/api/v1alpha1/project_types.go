package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProjectRepo is one source repository a Project's agents work on.
// +kubebuilder:validation:XValidation:rule="!self.url.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*@') || self.url.startsWith('ssh://')",message="url must not carry credentials (user:token@): reference a Secret with credentials.secretName"
// +kubebuilder:validation:XValidation:rule="!has(self.push) || self.url.startsWith('https://') || self.url.startsWith('http://')",message="push needs an http(s) url: the agent pushes through the pod's git gateway, which speaks smart HTTP"
type ProjectRepo struct {
	// Name is the short name Tasks and agents use to refer to the repo (e.g. "operator").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Name string `json:"name"`

	// URL is the clone URL of the repo: https://, http://, ssh:// or user@host:path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// DefaultBranch is the branch agents start from; empty means the remote's default.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`
	// +optional
	DefaultBranch string `json:"defaultBranch,omitempty"`

	// Credentials the workspace-init container clones with. Without them the clone is anonymous.
	// +optional
	Credentials *RepoCredentials `json:"credentials,omitempty"`

	// Push, when set, lets the agent push its work to the branch tatara/<task> (and branches under
	// it) through the pod's git gateway, which alone holds the push credential.
	// +optional
	Push *RepoPush `json:"push,omitempty"`
}

// RepoCredentials references a Secret in the Project's namespace that only the workspace-init
// container mounts; the agent container never sees it. For an http(s) url the Secret holds
// "token" (sent as the password of HTTP Basic auth by a git credential helper, never in the URL
// or argv) and optionally "username" (default x-access-token); for an ssh url (ssh:// or
// user@host:path) it holds "ssh-privatekey" and "known_hosts" (host keys are always checked).
// +kubebuilder:validation:XValidation:rule="!(self.secretName.startsWith('tatara-agent-') && self.secretName.endsWith('-token'))",message="secretName may not name a Task's token Secret (tatara-agent-<task>-token)"
type RepoCredentials struct {
	// SecretName is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
}

// RepoPush references the Secret with the push credential ("token", sent with the user name
// x-access-token, which GitHub, GitLab and Gitea accept with a token), mounted only into the
// git-gateway sidecar. The gateway forwards the agent's pushes to url and refuses
// any ref update outside refs/heads/tatara/<task>, deletions and tags.
// +kubebuilder:validation:XValidation:rule="!(self.secretName.startsWith('tatara-agent-') && self.secretName.endsWith('-token'))",message="secretName may not name a Task's token Secret (tatara-agent-<task>-token)"
type RepoPush struct {
	// SecretName is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
}

// AgentModel is how agent pods reach the model API. The credential lives only in the agent pod's
// model gateway sidecar (`tatara model-gateway`), which forwards the agent CLI's model requests to
// BaseURL and adds it: the agent gets ANTHROPIC_BASE_URL pointing at the gateway on loopback and no
// credential of any kind. The gateway meters every token (the Task's status.usage) and enforces
// TaskTokenBudget.
// +kubebuilder:validation:XValidation:rule="!(self.secretName.startsWith('tatara-agent-') && self.secretName.endsWith('-token'))",message="secretName may not name a Task's token Secret (tatara-agent-<task>-token)"
type AgentModel struct {
	// BaseURL of the model API, e.g. https://api.anthropic.com, or a company's LLM gateway.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/@?#\s]+(/[^?#\s]*)?$`
	BaseURL string `json:"baseURL"`
	// SecretName is the Secret, in the agent pod's namespace, holding the credential under
	// SecretKey; only the model gateway mounts it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// SecretKey is the key of the credential in SecretName.
	// +kubebuilder:default=api-key
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	SecretKey string `json:"secretKey,omitempty"`
	// AuthScheme is how the credential is sent: x-api-key (the model API's own header) or bearer
	// (Authorization: Bearer, what company LLM gateways usually take).
	// +kubebuilder:validation:Enum=x-api-key;bearer
	// +kubebuilder:default=x-api-key
	// +optional
	AuthScheme ModelAuthScheme `json:"authScheme,omitempty"`
	// TaskTokenBudget bounds the tokens one Task may use in all its attempts: every input,
	// output, cache-write and cache-read token the model API reports. Once a Task has used it,
	// the gateway refuses the agent's next model request and the Task fails with reason
	// BudgetExceeded. A request under way when the budget is reached completes. 0 is unlimited.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TaskTokenBudget int64 `json:"taskTokenBudget,omitempty"`
}

// ModelAuthScheme is how the model gateway sends the credential upstream.
type ModelAuthScheme string

const (
	ModelAuthAPIKey ModelAuthScheme = "x-api-key"
	ModelAuthBearer ModelAuthScheme = "bearer"
)

// AgentStorage holds the size limits of the agent pod's emptyDir volumes.
type AgentStorage struct {
	// Workspace is the limit of /workspace, where the repository is cloned and the agent works.
	// +kubebuilder:default="10Gi"
	// +optional
	Workspace *resource.Quantity `json:"workspace,omitempty"`
	// Home is the limit of the agent's HOME (its config, caches and transcripts).
	// +kubebuilder:default="2Gi"
	// +optional
	Home *resource.Quantity `json:"home,omitempty"`
	// Tmp is the limit of /tmp, shared by the agent and the cli sidecar.
	// +kubebuilder:default="1Gi"
	// +optional
	Tmp *resource.Quantity `json:"tmp,omitempty"`
}

// ProjectWorkspace holds how the workspace-init container prepares /workspace.
type ProjectWorkspace struct {
	// CloneDepth is the number of commits fetched (git clone --depth); 0 fetches the whole history.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	CloneDepth *int32 `json:"cloneDepth,omitempty"`

	// TimeoutSeconds bounds the clone; past it the Task fails with WorkspaceFailed/Timeout and the
	// agent never starts.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// ToolSearchMode is a value of the agent CLI's ENABLE_TOOL_SEARCH.
type ToolSearchMode string

// Tool search modes; ToolSearchOff is the default.
const (
	ToolSearchOff  ToolSearchMode = "false"
	ToolSearchOn   ToolSearchMode = "true"
	ToolSearchAuto ToolSearchMode = "auto"
)

// ProjectAgent holds the settings of every agent pod of a Project.
// +kubebuilder:validation:XValidation:rule="!has(self.model) || !has(self.extraEnvs) || self.extraEnvs.all(e, !(e.name in ['ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN']))",message="with model set, extraEnvs may not set ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN: the agent reaches the model API through the model gateway, which holds the credential"
// +kubebuilder:validation:XValidation:rule="!has(self.model) || !has(self.extraEnvs) || self.extraEnvs.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef) || !has(e.valueFrom.secretKeyRef.name) || e.valueFrom.secretKeyRef.name != self.model.secretName)",message="extraEnvs may not read model.secretName: only the model gateway holds the model credential"
type ProjectAgent struct {
	// Image, when set, is the image of the agent pod's main container: it holds the agent binary
	// at BinaryPath and whatever the agent needs at run time (libc, shell, git, ...). An init
	// container copies the static wrapper into it at /opt/tatara/wrapper, which runs the agent.
	// It must run as UID 65532 with a read-only root filesystem (HOME, /tmp and /workspace are
	// emptyDirs). Empty means the wrapper image itself, running `claude` from its PATH, which
	// only a wrapper image built with the agent in it has.
	// +optional
	Image string `json:"image,omitempty"`

	// BinaryPath is the path of the agent binary inside Image.
	// +kubebuilder:default=/agent
	// +kubebuilder:validation:Pattern=`^/[^\s]*[^/\s]$`
	// +optional
	BinaryPath string `json:"binaryPath,omitempty"`

	// ToolSearch is the agent CLI's ENABLE_TOOL_SEARCH. "false" (the default) sends every MCP tool
	// schema with each model request; "true" sends only the tool names and the model loads a
	// schema with one extra turn per distinct tool; "auto" asks the model API to count tokens and
	// inlines the schemas when they are small. Measured with make bench-tool-search: "true" saves
	// about 20% of input tokens when a task uses one tatara tool, is even at five and costs more
	// at ten, and always adds a model turn per tool; see the operator README.
	// +kubebuilder:validation:Enum="false";"true";auto
	// +kubebuilder:default="false"
	// +optional
	ToolSearch ToolSearchMode `json:"toolSearch,omitempty"`

	// ExtraEnvs are appended LAST to both containers' env, so an entry named like a Tatara
	// variable overrides the operator's value: the kubelet keeps the later of two entries with
	// the same name. Of the TATARA_ names only TATARA_TOOL_PROFILE (the documented override of
	// the kind's profile) and TATARA_WRAPPER_* (the wrapper's own settings) are accepted: the
	// others carry the Task's identity, token and backends, which a Project must not redirect.
	// HOME and TATARA_WRAPPER_STATE_DIR are refused too: the agent CLI reads its user settings
	// from the state dir and the shell and git theirs from HOME, and set into the workspace they
	// would hand that configuration to the repository (the wrapper refuses them there as well).
	// A value may come only from a Secret or ConfigMap key (secretKeyRef, configMapKeyRef).
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TATARA_') || e.name == 'TATARA_TOOL_PROFILE' || e.name.startsWith('TATARA_WRAPPER_'))",message="extraEnvs may not set TATARA_* variables other than TATARA_TOOL_PROFILE and TATARA_WRAPPER_*: they carry the Task's identity, token and backends"
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name != 'HOME' && e.name != 'TATARA_WRAPPER_STATE_DIR')",message="extraEnvs may not set HOME or TATARA_WRAPPER_STATE_DIR: the operator keeps the agent's home and the wrapper's state out of the workspace, whose files must not configure the agent CLI"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || ((has(e.valueFrom.secretKeyRef) || has(e.valueFrom.configMapKeyRef)) && !has(e.valueFrom.fieldRef) && !has(e.valueFrom.resourceFieldRef)))",message="extraEnvs valueFrom may only be a secretKeyRef or a configMapKeyRef"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef) || !(has(e.valueFrom.secretKeyRef.name) && e.valueFrom.secretKeyRef.name.startsWith('tatara-agent-') && e.valueFrom.secretKeyRef.name.endsWith('-token')))",message="extraEnvs may not read a Task's token Secret (tatara-agent-<task>-token)"
	// +optional
	ExtraEnvs []corev1.EnvVar `json:"extraEnvs,omitempty"`

	// RuntimeClassName of the agent pod, e.g. gvisor or kata: a sandboxed runtime puts a kernel
	// boundary between the agent's code and the node (docs/security.md recommends one for
	// untrusted agents). Empty means the cluster's default runtime.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// Resources of the wrapper (agent) container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServiceAccountName the agent pod runs as; empty means the namespace's default.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// ActiveDeadlineSeconds bounds how long an agent pod may run, init containers included (the
	// pod's activeDeadlineSeconds): past it the kubelet stops the pod and the Task fails with
	// reason DeadlineExceeded.
	// +kubebuilder:default=14400
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ActiveDeadlineSeconds int64 `json:"activeDeadlineSeconds,omitempty"`

	// Storage bounds the agent pod's scratch volumes (emptyDir sizeLimit): the kubelet evicts a
	// pod that writes past one, and the Task fails with reason Evicted.
	// +kubebuilder:default={}
	// +optional
	Storage AgentStorage `json:"storage,omitempty"`

	// Model, when set, keeps the model API credential out of the agent: see AgentModel. With it,
	// ExtraEnvs may not set the agent CLI's model variables, which would bypass the gateway. Without
	// it the agent CLI reaches the model API with whatever ExtraEnvs give it, and a key given
	// there is readable by the agent (the Project's ModelKeyVisible condition says so).
	// +optional
	Model *AgentModel `json:"model,omitempty"`

	// ---- Pod loss (the Task controller's retry policy) ----

	// RetryOnPodLoss lets a Task run a second agent pod when its first one is lost before it
	// finished: deleted, evicted, lost with its node, or gone without a trace. The retry starts
	// once the lost pod is gone, with a fresh token. Default false: the Task fails with the loss's
	// reason. A pod that failed on its own (exit code, init container, deadline) is never retried.
	// An agent may have pushed or commented before its pod was lost, so retry only Tasks whose
	// directives can run twice.
	// +optional
	RetryOnPodLoss bool `json:"retryOnPodLoss,omitempty"`

	// ---- end of pod loss ----
}

// MaxAttemptsWithRetry is how many agent pods a Task may get when its Project sets
// spec.agent.retryOnPodLoss: the first and one retry.
const MaxAttemptsWithRetry = 2

// ProjectSpec defines the desired state of a Project.
// +kubebuilder:validation:XValidation:rule="!has(self.egress) || self.egress.mode != 'Proxy' || !has(self.agent) || !has(self.agent.extraEnvs) || self.agent.extraEnvs.all(e, !(e.name in ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']))",message="agent.extraEnvs may not set the proxy variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, ALL_PROXY) when egress.mode is Proxy: the operator sets them to the egress proxy"
// +kubebuilder:validation:XValidation:rule="!has(self.warmPool) || self.warmPool.all(p, !has(p.repo) || size(p.repo) == 0 || (has(self.repos) && self.repos.exists(r, r.name == p.repo)))",message="warmPool[].repo must name one of spec.repos"
type ProjectSpec struct {
	// Repos are the repositories of the Project.
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=name
	// +optional
	Repos []ProjectRepo `json:"repos,omitempty"`

	// Agent holds the agent pod settings.
	// +optional
	Agent ProjectAgent `json:"agent,omitempty"`

	// Workspace holds how a Task's repo is cloned into the agent pod.
	// +optional
	Workspace ProjectWorkspace `json:"workspace,omitempty"`

	// WarmPool keeps agent pods started ahead of Tasks, per Task kind, so a Task of that kind
	// starts in a pod that already runs. A pool pod is built without any Task's name or credential
	// and receives them when a Task claims it; it serves that one Task and is deleted with it, and
	// the pool starts a replacement. See docs/architecture.md, "The warm pool".
	// +kubebuilder:validation:MaxItems=7
	// +listType=map
	// +listMapKey=kind
	// +optional
	WarmPool []WarmPool `json:"warmPool,omitempty"`

	// Egress is how the Project's agent pods reach the outside of the cluster. Unset, the
	// operator gives agent pods no proxy and what they reach is up to the namespace's
	// NetworkPolicies (the OpenEgress condition is Unknown); the tatara-project chart always sets
	// it, to Proxy by default.
	// +optional
	Egress *ProjectEgress `json:"egress,omitempty"`

	// MaxActiveTasks bounds the Project's Tasks that are not yet Succeeded, Failed or Cancelled;
	// subtask_create past it is refused with 429 and nothing is created.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxActiveTasks int32 `json:"maxActiveTasks,omitempty"`
}

// ProjectEgress is how agent pods reach the outside of the cluster: through the Project's egress
// proxy, which lets through only the hosts on its allow-list, or directly (Open).
// +kubebuilder:validation:XValidation:rule="self.mode != 'Proxy' || (has(self.proxyURL) && size(self.proxyURL) > 0)",message="proxyURL is required when mode is Proxy"
type ProjectEgress struct {
	// Mode is Proxy (every connection out of the cluster goes through the egress proxy at
	// ProxyURL, which lets through only Allow, the hosts of spec.repos and the model upstream of
	// spec.agent.model) or Open (agent pods connect to any public address directly; the Project's
	// OpenEgress condition is True). The NetworkPolicy that stops a direct connection is the
	// tatara-project chart's.
	// +kubebuilder:validation:Enum=Proxy;Open
	// +kubebuilder:default=Proxy
	Mode EgressMode `json:"mode"`

	// ProxyURL is the egress proxy's URL, http://<host>:<port>, which agent pods get as
	// HTTPS_PROXY and HTTP_PROXY (the tatara-project chart's proxy Service).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^http://[-a-z0-9.]+:[0-9]{1,5}$`
	// +optional
	ProxyURL string `json:"proxyURL,omitempty"`

	// Allow lists the hosts the proxy lets agent pods reach, besides the Project's repo hosts
	// and model upstream. An entry is a host name ("pkgs.example.com") or a wildcard of its
	// subdomains ("*.example.com", which does not match example.com itself), optionally followed by
	// ":<port>"; without a port it allows 443 and 80. Names are matched case-insensitively and
	// without a trailing dot; write an internationalised name in its xn-- form. An address
	// (1.2.3.4, [::1]) is no entry: the proxy refuses connections to addresses.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?([a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?\.?(:[0-9]{1,5})?$`
	// +listType=set
	// +optional
	Allow []string `json:"allow,omitempty"`
}

// EgressMode is how agent pods reach the outside of the cluster.
type EgressMode string

const (
	// EgressProxy: only through the Project's egress proxy and its allow-list.
	EgressProxy EgressMode = "Proxy"
	// EgressOpen: directly, to any public address.
	EgressOpen EgressMode = "Open"
)

// WarmPool is the pool of ready agent pods of one Task kind.
type WarmPool struct {
	// Kind is the Task kind the pool's pods serve: their tool profile is the kind's.
	Kind TaskKind `json:"kind"`

	// Size is how many unclaimed pods the pool keeps; each counts against the namespace's quota
	// like any pod. 0 keeps none.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	Size int32 `json:"size"`

	// Repo is the repo (spec.repos[].name) the pool's pods clone, at its default branch, before
	// they are claimed. A Task claims a pool pod only when it names this repo (or, with Repo
	// empty, no repo) and asks for no other ref; any other Task of the kind starts a pod of its own.
	// +kubebuilder:validation:MaxLength=100
	// +optional
	Repo string `json:"repo,omitempty"`
}

// MaxWarmPoolSize is the largest pool size the CRD accepts.
const MaxWarmPoolSize = 50

// DefaultMaxActiveTasks applies to a Project stored before the field had a default.
const DefaultMaxActiveTasks = 50

// ProjectStatus defines the observed state of a Project: whether the operator can build its agent
// pods now. What keeps one Task from running (RepoNotFound, PodRejected, ...) stays that Task's
// Ready condition.
type ProjectStatus struct {
	// Conditions of the Project. Ready is True (reason AgentPodsBuildable) when the runtime
	// ConfigMaps are present and valid and every Secret its repos name exists; False names the
	// first thing missing: RuntimeConfigMissing or RuntimeConfigInvalid (the ConfigMap), or
	// RepoSecretMissing (the Secret and the repo).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The Project's Ready condition and its reasons; RuntimeConfigMissing and RuntimeConfigInvalid
// are the Task's (ReasonRuntimeConfigMissing, ReasonRuntimeConfigInvalid).
const (
	// ProjectConditionReady is True when the operator can build the Project's agent pods.
	ProjectConditionReady = "Ready"
	// ReasonRepoSecretMissing: a repo's credentials or push Secret does not exist.
	ReasonRepoSecretMissing = "RepoSecretMissing"
	// ReasonAgentPodsBuildable: everything an agent pod of the Project needs is there.
	ReasonAgentPodsBuildable = "AgentPodsBuildable"
	// ReasonModelSecretMissing: spec.agent.model's Secret does not exist.
	ReasonModelSecretMissing = "ModelSecretMissing"

	// ProjectConditionModelKeyVisible is True when spec.agent.extraEnvs gives the agent a model
	// credential (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN): the agent,
	// and every command it runs, can read it. spec.agent.model keeps it in the model gateway.
	ProjectConditionModelKeyVisible = "ModelKeyVisible"
	// ReasonModelKeyInExtraEnvs and ReasonModelGateway are its reasons.
	ReasonModelKeyInExtraEnvs = "ModelKeyInExtraEnvs"
	ReasonModelGateway        = "ModelGateway"

	// ProjectConditionOpenEgress is True when the Project's agent pods reach the outside of the
	// cluster directly (spec.egress.mode Open), False when only through its egress proxy, and
	// Unknown when spec.egress is unset.
	ProjectConditionOpenEgress = "OpenEgress"
	// ReasonEgressOpen, ReasonEgressProxy and ReasonEgressNotConfigured are its reasons.
	ReasonEgressOpen          = "EgressOpen"
	ReasonEgressProxy         = "EgressProxy"
	ReasonEgressNotConfigured = "EgressNotConfigured"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tproj
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="Project names are at most 63 characters: agent pods carry the name as a label value"

// Project is a set of repositories and the settings of the agents working on them.
type Project struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProjectSpec   `json:"spec,omitempty"`
	Status ProjectStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProjectList contains a list of Project.
type ProjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Project `json:"items"`
}

// HasRepo reports whether the Project lists a repo of that name.
func (p *Project) HasRepo(name string) bool { return p.Repo(name) != nil }

// Repo returns the Project's repo of that name, or nil.
func (p *Project) Repo(name string) *ProjectRepo {
	for i := range p.Spec.Repos {
		if p.Spec.Repos[i].Name == name {
			return &p.Spec.Repos[i]
		}
	}
	return nil
}
