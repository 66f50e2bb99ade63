package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InternalIssueSpec is what a group of reports is: the Project, the category and the offending
// tool the operator grouped them by, and the fingerprint that names the group. Resolved is the one
// field a person sets.
type InternalIssueSpec struct {
	// ProjectRef is the Project of the Tasks that reported it.
	ProjectRef ProjectReference `json:"projectRef"`
	// Category of the reports (report_internal_issue's category).
	// +kubebuilder:validation:Enum=tool_error;directive_contradiction;workspace_broken;memory_inconsistent;graph_inconsistent;auth;other
	Category string `json:"category"`
	// OffendingTool the reports named, if any.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	OffendingTool string `json:"offendingTool,omitempty"`
	// Fingerprint is the SHA-256 (hex) of the grouping input: GroupingVersion, the Project, the
	// category, the offending tool and the normalised description. The object's name derives from it.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Fingerprint string `json:"fingerprint"`
	// GroupingVersion is the version of the grouping rule that made Fingerprint: a later rule
	// makes new records and never regroups these.
	// +kubebuilder:validation:Minimum=1
	GroupingVersion int32 `json:"groupingVersion"`
	// Overflow marks the Project's one record that counts the reports of new groups once the
	// Project holds the operator's cap of records (--internal-issues-per-project).
	// +optional
	Overflow bool `json:"overflow,omitempty"`
	// Resolved is set by a person who dealt with the problem; the next report of the group sets
	// it back to false and counts a reopen.
	// +optional
	Resolved bool `json:"resolved,omitempty"`
}

// InternalIssueTask is a Task that reported.
type InternalIssueTask struct {
	// Kind of the Task.
	Kind TaskKind `json:"kind"`
	// Name of the Task.
	Name string `json:"name"`
	// Reported is when its latest report of this group was recorded.
	Reported metav1.Time `json:"reported"`
}

// InternalIssueStatus counts the reports of the group.
type InternalIssueStatus struct {
	// Count of reports recorded, each once whatever its retries.
	// +optional
	Count int64 `json:"count,omitempty"`
	// FirstSeen is when the first report was recorded.
	// +optional
	FirstSeen *metav1.Time `json:"firstSeen,omitempty"`
	// LastSeen is when the latest report was recorded.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// Severity is the highest severity reported (warn, then error).
	// +optional
	Severity string `json:"severity,omitempty"`
	// Description is the first report's description, with secrets masked, cut to 1 KiB.
	// +optional
	Description string `json:"description,omitempty"`
	// RecentTasks are the last Tasks that reported (at most 5), the latest last.
	// +optional
	// +listType=atomic
	RecentTasks []InternalIssueTask `json:"recentTasks,omitempty"`
	// RecentRequestIDs are the idempotency keys of the last reports (at most 32): a report sent
	// again with one of them is not counted again.
	// +optional
	// +listType=atomic
	RecentRequestIDs []string `json:"recentRequestIDs,omitempty"`
	// Reopens counts the reports that came after a person marked the record resolved.
	// +optional
	Reopens int32 `json:"reopens,omitempty"`
	// LastReopened is when the latest reopen happened.
	// +optional
	LastReopened *metav1.Time `json:"lastReopened,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tii
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.spec.projectRef.name`
// +kubebuilder:printcolumn:name="Category",type=string,JSONPath=`.spec.category`
// +kubebuilder:printcolumn:name="Severity",type=string,JSONPath=`.status.severity`
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.status.count`
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.offendingTool`
// +kubebuilder:printcolumn:name="Resolved",type=boolean,JSONPath=`.spec.resolved`
// +kubebuilder:printcolumn:name="Reopens",type=integer,JSONPath=`.status.reopens`,priority=1
// +kubebuilder:printcolumn:name="Last Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.status.description`,priority=1

// InternalIssue is the durable record of a group of report_internal_issue reports of one Project:
// the operator writes it from the reports its REST API receives; a person marks it resolved.
type InternalIssue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InternalIssueSpec   `json:"spec,omitempty"`
	Status InternalIssueStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InternalIssueList contains a list of InternalIssue.
type InternalIssueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InternalIssue `json:"items"`
}
