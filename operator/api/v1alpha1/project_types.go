package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProjectRepo is one source repository a Project's agents work on.
type ProjectRepo struct {
	// Name is the short name Tasks and agents use to refer to the repo (e.g. "operator").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Name string `json:"name"`

	// URL is the clone URL of the repo.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`

	// DefaultBranch is the branch agents start from; empty means the remote's default.
	// +optional
	DefaultBranch string `json:"defaultBranch,omitempty"`
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
	// variable (e.g. TATARA_TOOL_PROFILE) overrides the operator's value: the kubelet keeps
	// the later of two entries with the same name.
	// +optional
	ExtraEnvs []corev1.EnvVar `json:"extraEnvs,omitempty"`

	// Resources of the wrapper (agent) container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServiceAccountName the agent pod runs as; empty means the namespace's default.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// ProjectSpec defines the desired state of a Project.
type ProjectSpec struct {
	// Repos are the repositories of the Project.
	// +listType=map
	// +listMapKey=name
	// +optional
	Repos []ProjectRepo `json:"repos,omitempty"`

	// Agent holds the agent pod settings.
	// +optional
	Agent ProjectAgent `json:"agent,omitempty"`
}

// ProjectStatus defines the observed state of a Project. Nothing is recorded here yet: what keeps
// a Project's Tasks from running (ProjectNotFound, RepoNotFound, RuntimeConfigMissing, ...) is each
// Task's Ready condition, where the reconcile that meets it records it.
type ProjectStatus struct{}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tproj
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
func (p *Project) HasRepo(name string) bool {
	for _, r := range p.Spec.Repos {
		if r.Name == name {
			return true
		}
	}
	return false
}
