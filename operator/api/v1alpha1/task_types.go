package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TaskKind is what a Task asks its agent to do; it selects the agent's tool profile and
// which operator tools the Task's token may call.
// +kubebuilder:validation:Enum=implement;review;triageIssue;brainstorm;issueLifecycle;incident;selfImprove
type TaskKind string

// The Task kinds. healthCheck Tasks are of kind brainstorm.
const (
	KindImplement      TaskKind = "implement"
	KindReview         TaskKind = "review"
	KindTriageIssue    TaskKind = "triageIssue"
	KindBrainstorm     TaskKind = "brainstorm"
	KindIssueLifecycle TaskKind = "issueLifecycle"
	KindIncident       TaskKind = "incident"
	KindSelfImprove    TaskKind = "selfImprove"
)

// TaskKinds lists every kind the CRD enum accepts, in enum order. A test compares it with
// the enum of the generated CRD, so the marker above and this list cannot drift apart.
var TaskKinds = []TaskKind{
	KindImplement, KindReview, KindTriageIssue, KindBrainstorm,
	KindIssueLifecycle, KindIncident, KindSelfImprove,
}

// Valid reports whether k is one of TaskKinds.
func (k TaskKind) Valid() bool {
	for _, known := range TaskKinds {
		if k == known {
			return true
		}
	}
	return false
}

// TaskPhase is the lifecycle phase of a Task, driven by its agent pod.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Cancelled
type TaskPhase string

// The Task phases; Succeeded, Failed and Cancelled are terminal.
const (
	PhasePending   TaskPhase = "Pending"
	PhaseRunning   TaskPhase = "Running"
	PhaseSucceeded TaskPhase = "Succeeded"
	PhaseFailed    TaskPhase = "Failed"
	PhaseCancelled TaskPhase = "Cancelled"
)

// TaskPhases lists every phase, for validating query filters.
var TaskPhases = []TaskPhase{PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseCancelled}

// Terminal reports whether the phase is final.
func (p TaskPhase) Terminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseCancelled
}

// ProjectReference names a Project in the Task's namespace.
type ProjectReference struct {
	// Name of the Project.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// TaskCancel asks the operator to stop the Task's agent.
type TaskCancel struct {
	// Reason the Task was cancelled.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// TaskSpec defines the desired state of a Task.
type TaskSpec struct {
	// Kind of work; selects the agent's tool profile.
	Kind TaskKind `json:"kind"`

	// ProjectRef is the Project the Task belongs to.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="projectRef is immutable"
	ProjectRef ProjectReference `json:"projectRef"`

	// Repo is the name of one of the Project's repos.
	// +optional
	Repo string `json:"repo,omitempty"`

	// Directive is the agent's prompt, at most 64 KiB of UTF-8. The agent receives it as one
	// argv string and one env value, each of which Linux caps at 128 KiB (MAX_ARG_STRLEN); a
	// longer one would fail at exec inside the pod instead of here.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 65536",message="directive is at most 65536 bytes of UTF-8 (64 KiB)"
	Directive string `json:"directive"`

	// Parent is the name of the Task that created this one as a subtask.
	// +optional
	Parent string `json:"parent,omitempty"`

	// Cancel, once set, stops the agent and ends the Task as Cancelled.
	// +optional
	Cancel *TaskCancel `json:"cancel,omitempty"`
}

// TaskOutcome is the first outcome intent an agent recorded.
type TaskOutcome struct {
	// Intent is the operator tool that recorded it (e.g. pr_outcome).
	Intent string `json:"intent"`
	// Value is the intent's enum value when it has one (e.g. opened, approve, triaged).
	// +optional
	Value string `json:"value,omitempty"`
	// Body is the canonical JSON of the request; the same intent with the same body is idempotent.
	Body string `json:"body"`
	// RecordedAt is when the intent was recorded.
	RecordedAt metav1.Time `json:"recordedAt"`
}

// ActivityType classifies an activity log entry.
type ActivityType string

// The activity entry types.
const (
	ActivityNote             ActivityType = "Note"
	ActivityComment          ActivityType = "Comment"
	ActivityIssueComment     ActivityType = "IssueComment"
	ActivityProposal         ActivityType = "Proposal"
	ActivityIntent           ActivityType = "Intent"
	ActivitySubtaskCreated   ActivityType = "SubtaskCreated"
	ActivitySubtaskCancelled ActivityType = "SubtaskCancelled"
	ActivityPod              ActivityType = "Pod"
)

// ActivityEntry is one line of a Task's bounded activity log.
type ActivityEntry struct {
	// Time the entry was recorded.
	Time metav1.Time `json:"time"`
	// Type of the entry.
	Type ActivityType `json:"type"`
	// Text of the entry, cut to MaxActivityText bytes.
	Text string `json:"text"`
	// Truncated is true when Text was cut.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// Proposal is an issue an agent proposed (propose_issue).
type Proposal struct {
	// Title of the proposed issue.
	Title string `json:"title"`
	// Body of the proposed issue.
	Body string `json:"body"`
	// Repo the issue is proposed for; empty means the Task's repo.
	// +optional
	Repo string `json:"repo,omitempty"`
	// CreatedAt is when it was proposed.
	CreatedAt metav1.Time `json:"createdAt"`
}

// Bounds that keep a Task object well under etcd's object size limit.
const (
	// MaxActivity is the number of activity entries kept (oldest dropped first).
	MaxActivity = 50
	// MaxActivityText is the longest activity text kept, in bytes.
	MaxActivityText = 2048
	// MaxProposals is the number of proposals one Task may record.
	MaxProposals = 20
)

// TaskStatus defines the observed state of a Task.
type TaskStatus struct {
	// Phase of the Task.
	// +optional
	Phase TaskPhase `json:"phase,omitempty"`

	// PodName is the agent pod's name once created.
	// +optional
	PodName string `json:"podName,omitempty"`

	// SecretName is the Secret holding the Task's API token.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// Outcome is the first outcome intent recorded by the agent.
	// +optional
	Outcome *TaskOutcome `json:"outcome,omitempty"`

	// ChangeSummary is the summary recorded by change_summary.
	// +optional
	ChangeSummary string `json:"changeSummary,omitempty"`

	// Activity is the bounded log of what happened (newest last, at most MaxActivity).
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Activity []ActivityEntry `json:"activity,omitempty"`

	// Proposals the agent made (propose_issue).
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Proposals []Proposal `json:"proposals,omitempty"`

	// ObservedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the Task; Ready tells whether the agent pod runs, with a reason when not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AddActivity appends an entry, cutting its text and dropping the oldest entries beyond MaxActivity.
func (s *TaskStatus) AddActivity(now metav1.Time, typ ActivityType, text string) {
	e := ActivityEntry{Time: now, Type: typ, Text: text}
	if len(e.Text) > MaxActivityText {
		e.Text = truncateUTF8(e.Text, MaxActivityText)
		e.Truncated = true
	}
	s.Activity = append(s.Activity, e)
	if over := len(s.Activity) - MaxActivity; over > 0 {
		s.Activity = append([]ActivityEntry(nil), s.Activity[over:]...)
	}
}

// truncateUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Condition types and reasons of a Task.
const (
	// ConditionReady is True while the agent pod is running and ready.
	ConditionReady = "Ready"

	ReasonProjectNotFound      = "ProjectNotFound"
	ReasonRepoNotFound         = "RepoNotFound"
	ReasonRuntimeConfigMissing = "RuntimeConfigMissing"
	ReasonRuntimeConfigInvalid = "RuntimeConfigInvalid"
	ReasonPodPending           = "PodPending"
	ReasonPodRunning           = "PodRunning"
	ReasonPodSucceeded         = "PodSucceeded"
	ReasonPodFailed            = "PodFailed"
	ReasonPodMissing           = "PodMissing"
	ReasonPodRejected          = "PodRejected"
	ReasonCancelled            = "Cancelled"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ttask
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.spec.projectRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome.intent`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 50",message="Task names are at most 50 characters: the agent pod is tatara-agent-<task> and the name is a label value"

// Task is one unit of agent work; the operator runs one agent pod for it.
type Task struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TaskSpec   `json:"spec,omitempty"`
	Status TaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TaskList contains a list of Task.
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}
