package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// TaskPhase is the lifecycle phase of a Task: driven by its agent pod, except Cancelled, which
// spec.cancel or an ancestor's cancellation sets. controller/task_controller.go says which file
// sets each.
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

// TaskSpec defines the desired state of a Task. Every field but cancel is immutable: the agent pod
// is built from them once (kind: tool profile and the REST API's authorization; projectRef, repo
// and ref: the workspace and credentials; directive: the agent's prompt; parent: who may read and
// cancel the Task as its subtask), so a later change would either do nothing or make the Task's
// record disagree with what its pod runs and is allowed.
// +kubebuilder:validation:XValidation:rule="has(self.ref) == has(oldSelf.ref) && (!has(self.ref) || self.ref == oldSelf.ref)",message="ref is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.repo) == has(oldSelf.repo) && (!has(self.repo) || self.repo == oldSelf.repo)",message="repo is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.parent) == has(oldSelf.parent) && (!has(self.parent) || self.parent == oldSelf.parent)",message="parent is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.ref) || has(self.repo)",message="ref needs repo: it names a branch, tag or commit of that repo"
type TaskSpec struct {
	// Kind of work; selects the agent's tool profile. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kind is immutable"
	Kind TaskKind `json:"kind"`

	// ProjectRef is the Project the Task belongs to.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="projectRef is immutable"
	ProjectRef ProjectReference `json:"projectRef"`

	// Repo is the name of one of the Project's repos; the workspace-init container clones it into
	// /workspace before the agent starts. Immutable.
	// +optional
	Repo string `json:"repo,omitempty"`

	// Ref is the branch, tag or full commit id to check out; empty means the repo's defaultBranch,
	// else the remote's default branch. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`
	// +optional
	Ref string `json:"ref,omitempty"`

	// Directive is the agent's prompt, at most 64 KiB of UTF-8. The agent receives it as one
	// argv string and one env value, each of which Linux caps at 128 KiB (MAX_ARG_STRLEN); a
	// longer one would fail at exec inside the pod instead of here. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 65536",message="directive is at most 65536 bytes of UTF-8 (64 KiB)"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="directive is immutable"
	Directive string `json:"directive"`

	// Parent is the name of the Task that created this one as a subtask. Immutable. Cancelling a
	// Task cancels every descendant that has not finished yet.
	// +optional
	Parent string `json:"parent,omitempty"`

	// Cancel, once set, stops the agent and ends the Task as Cancelled.
	// +optional
	Cancel *TaskCancel `json:"cancel,omitempty"`
}

// TaskOutcome is the last outcome intent the agent recorded: a later one replaces it until the
// Task ends.
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
	// RequestID is the Idempotency-Key of the tool call that recorded the entry: a retry of that
	// call finds it and records nothing again.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RequestID string `json:"requestID,omitempty"`
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
	// RequestID is the Idempotency-Key of the propose_issue call (see ActivityEntry.RequestID).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RequestID string `json:"requestID,omitempty"`
}

// Bounds that keep a Task object well under etcd's object size limit.
const (
	// MaxActivity is the number of activity entries kept (oldest dropped first).
	MaxActivity = 50
	// MaxNotes is the number of notes kept (oldest dropped first, and counted).
	MaxNotes = 50
	// MaxActivityText is the longest activity text kept, in bytes.
	MaxActivityText = 2048
	// MaxProposals is the number of proposals one Task may record.
	MaxProposals = 20
	// MaxAttemptMessage is the longest attempt message kept, in bytes.
	MaxAttemptMessage = 1024
)

// TaskAttempt is one agent pod the operator created for the Task. It is recorded BEFORE the pod is
// created, so a pod whose own record was lost (the operator stopped between the create and the
// status write, then the pod was deleted) still shows: the operator never creates a pod for a Task
// with an attempt it cannot account for unless a retry is allowed.
type TaskAttempt struct {
	// Number counts the attempts from 1.
	// +kubebuilder:validation:Minimum=1
	Number int32 `json:"number"`

	// PodName is the name of the attempt's pod.
	PodName string `json:"podName"`

	// PodUID is the uid of the attempt's pod, recorded once the operator saw it; empty when the
	// operator stopped before it could (the pod may then never have been created).
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`

	// Warm is true when the attempt's pod came from the Project's warm pool: it was claimed, not
	// created for the Task.
	// +optional
	Warm bool `json:"warm,omitempty"`

	// StartedAt is when the attempt was recorded, just before its pod was created.
	StartedAt metav1.Time `json:"startedAt"`

	// FinishedAt is when the operator saw the attempt end; unset while it runs.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// Reason the attempt ended, one of the Ready condition's reasons (PodSucceeded, PodFailed,
	// Evicted, NodeLost, PodDeleted, PodMissing, DeadlineExceeded, Cancelled, ...).
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says how it ended, cut to MaxAttemptMessage bytes.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// Usage is what the attempt's agent used of the model, as its pod's model gateway metered
	// it; recorded when the ended pod is mirrored, unset for a pod without a model gateway or an
	// attempt that ended otherwise (cancelled, lost, a restarted sidecar).
	// +optional
	Usage *ModelUsage `json:"usage,omitempty"`
}

// ModelUsage counts model requests and the tokens the model API reported for them.
type ModelUsage struct {
	// Requests the model gateway forwarded upstream.
	// +kubebuilder:validation:Minimum=0
	Requests int64 `json:"requests"`
	// +kubebuilder:validation:Minimum=0
	InputTokens int64 `json:"inputTokens"`
	// +kubebuilder:validation:Minimum=0
	OutputTokens int64 `json:"outputTokens"`
	// CacheCreationInputTokens were written to the prompt cache.
	// +kubebuilder:validation:Minimum=0
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
	// CacheReadInputTokens were read from the prompt cache.
	// +kubebuilder:validation:Minimum=0
	CacheReadInputTokens int64 `json:"cacheReadInputTokens"`
	// Tokens is the sum of the four token counts: what a Project's token budget bounds.
	// +kubebuilder:validation:Minimum=0
	Tokens int64 `json:"tokens"`
}

// Finished reports whether the attempt has ended.
func (a *TaskAttempt) Finished() bool { return a.FinishedAt != nil }

// Finish records how the attempt ended.
func (a *TaskAttempt) Finish(now metav1.Time, reason, msg string) {
	a.FinishedAt, a.Reason, a.Message = &now, reason, truncateUTF8(msg, MaxAttemptMessage)
}

// SetAttemptUsage records the current attempt's model usage (set, not added: recording the same
// pod's report again changes nothing) and makes Usage the sum over every attempt.
func (s *TaskStatus) SetAttemptUsage(u ModelUsage) {
	cur := s.CurrentAttempt()
	if cur == nil {
		return
	}
	u.Tokens = u.InputTokens + u.OutputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	cur.Usage = &u
	var total ModelUsage
	for _, a := range s.Attempts {
		if a.Usage == nil {
			continue
		}
		total.Requests += a.Usage.Requests
		total.InputTokens += a.Usage.InputTokens
		total.OutputTokens += a.Usage.OutputTokens
		total.CacheCreationInputTokens += a.Usage.CacheCreationInputTokens
		total.CacheReadInputTokens += a.Usage.CacheReadInputTokens
		total.Tokens += a.Usage.Tokens
	}
	s.Usage = &total
}

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

	// TokenHash is the hex SHA-256 of the token the operator put in SecretName. Authentication
	// accepts a token only if it hashes to this value, which only the operator writes (the status
	// subresource), so a Secret made or altered by anyone else authenticates nobody.
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{64})?$`
	// +optional
	TokenHash string `json:"tokenHash,omitempty"`

	// Outcome is the last outcome intent the agent recorded (it stands once the Task ends).
	// +optional
	Outcome *TaskOutcome `json:"outcome,omitempty"`

	// ChangeSummary is the summary recorded by change_summary.
	// +optional
	ChangeSummary string `json:"changeSummary,omitempty"`

	// Activity is the bounded log of what happened (newest last, at most MaxActivity).
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Activity []ActivityEntry `json:"activity,omitempty"`

	// Notes are the agent's task_note entries, newest last: a history of their own (at most
	// MaxNotes), so that a chatty agent never pushes pod, intent or comment entries out of Activity.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Notes []ActivityEntry `json:"notes,omitempty"`

	// NotesDropped is how many notes were dropped from Notes, oldest first, to keep it at MaxNotes:
	// every recorded note is either in Notes or counted here.
	// +kubebuilder:validation:Minimum=0
	// +optional
	NotesDropped int64 `json:"notesDropped,omitempty"`

	// Proposals the agent made (propose_issue).
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Proposals []Proposal `json:"proposals,omitempty"`

	// Attempts are the agent pods created for the Task, oldest first; the last one is current.
	// There is one unless the Project allows a retry after a lost pod (spec.agent.retryOnPodLoss).
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Attempts []TaskAttempt `json:"attempts,omitempty"`

	// Usage is the model use of every attempt together (each attempt's is in Attempts).
	// +optional
	Usage *ModelUsage `json:"usage,omitempty"`

	// ObservedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the Task; Ready tells whether the agent pod runs, with a reason when not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CurrentAttempt is the last attempt, or nil before the first pod.
func (s *TaskStatus) CurrentAttempt() *TaskAttempt {
	if len(s.Attempts) == 0 {
		return nil
	}
	return &s.Attempts[len(s.Attempts)-1]
}

// AddActivity appends an entry, cutting its text and dropping the oldest entries beyond MaxActivity.
func (s *TaskStatus) AddActivity(now metav1.Time, typ ActivityType, text string) {
	s.AddRequestActivity(now, typ, text, "")
}

// AddRequestActivity is AddActivity for the tool call with Idempotency-Key requestID ("" for
// none). It returns false, and adds nothing, when an entry of that request is already kept.
func (s *TaskStatus) AddRequestActivity(now metav1.Time, typ ActivityType, text, requestID string) bool {
	added, _ := appendBounded(&s.Activity, MaxActivity, ActivityEntry{Time: now, Type: typ, Text: text, RequestID: requestID})
	return added
}

// AddNote appends a task_note entry of the call with Idempotency-Key requestID ("" for none),
// cutting its text, dropping the oldest notes beyond MaxNotes and counting them in NotesDropped. It
// returns false, and adds nothing, when a note of that request is already kept.
func (s *TaskStatus) AddNote(now metav1.Time, text, requestID string) bool {
	added, dropped := appendBounded(&s.Notes, MaxNotes, ActivityEntry{Time: now, Type: ActivityNote, Text: text, RequestID: requestID})
	s.NotesDropped += int64(dropped)
	return added
}

// appendBounded appends e to *log, its text cut to MaxActivityText, unless an entry of the same
// non-empty RequestID is already there, and drops the oldest entries beyond limit. It returns
// whether e was added and how many entries were dropped.
func appendBounded(log *[]ActivityEntry, limit int, e ActivityEntry) (added bool, dropped int) {
	if e.RequestID != "" && slices.ContainsFunc(*log, func(k ActivityEntry) bool { return k.RequestID == e.RequestID }) {
		return false, 0
	}
	if len(e.Text) > MaxActivityText {
		e.Text = truncateUTF8(e.Text, MaxActivityText)
		e.Truncated = true
	}
	*log = append(*log, e)
	if over := len(*log) - limit; over > 0 {
		*log = append([]ActivityEntry(nil), (*log)[over:]...)
		return true, over
	}
	return true, 0
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
	// ReasonUnknownKind: this operator maps the Task's kind to no tool profile (a Task written
	// for a newer operator, after a rollback). No pod starts: its cli would serve every tool.
	ReasonUnknownKind = "UnknownKind"

	// The pod was lost before it finished: being deleted (its deletion timestamp is set) or
	// gone, evicted (API eviction, node pressure, preemption), or lost with its node (node
	// controller, pod garbage collector, node shutdown). Without a retry the Task fails with it.
	ReasonPodDeleted = "PodDeleted"
	ReasonEvicted    = "Evicted"
	ReasonNodeLost   = "NodeLost"
	// ReasonRetrying: an attempt's pod was lost and the Project allows a retry; the next attempt
	// starts once the lost pod is gone.
	ReasonRetrying = "Retrying"
	// ReasonDeadlineExceeded: the pod ran past its activeDeadlineSeconds.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonInitContainerFailed: an init container other than workspace-init (which has its own
	// WorkspaceFailed) failed, so the agent never started; the message names it.
	ReasonInitContainerFailed = "InitContainerFailed"
	// ReasonParentCancelled: an ancestor Task was cancelled, which cancels its unfinished
	// descendants.
	ReasonParentCancelled = "ParentCancelled"
	// ReasonSidecarRestarted: a sidecar (the cli, the git gateway) restarted while the agent ran.
	// Its loopback port was free in between, for the agent in the same network namespace to take,
	// so the operator stops the pod rather than trust what answers there now.
	ReasonSidecarRestarted = "SidecarRestarted"
	// ReasonBudgetExceeded: the Task spent its token budget (Project spec.agent.model
	// .taskTokenBudget), and the model gateway refused the agent's next model request.
	ReasonBudgetExceeded = "BudgetExceeded"

	// ConditionWorkspaceFailed is True when the workspace-init container could not prepare
	// /workspace; its reason is what workspace-init classified (RepoNotFound, AuthFailed,
	// RefNotFound, Timeout, ...: tatara.dev/cli/pkg/workspace) and the agent never started.
	ConditionWorkspaceFailed = "WorkspaceFailed"
	// ReasonWorkspaceFailed is the Ready reason of a Task whose workspace could not be prepared.
	ReasonWorkspaceFailed = "WorkspaceFailed"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ttask
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.spec.projectRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome.intent`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.usage.tokens`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// The selectable fields let the REST API list only the Tasks a decision needs from the API server
// (a parent's children, a Project's active Tasks) with field selectors.
// +kubebuilder:selectablefield:JSONPath=`.spec.parent`
// +kubebuilder:selectablefield:JSONPath=`.spec.projectRef.name`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
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
