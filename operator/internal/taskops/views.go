package taskops

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TaskView is the JSON shape of a Task in answers.
type TaskView struct {
	Name          string                   `json:"name"`
	Kind          tatarav1.TaskKind        `json:"kind"`
	Project       string                   `json:"project"`
	Repo          string                   `json:"repo,omitempty"`
	Directive     string                   `json:"directive"`
	Parent        string                   `json:"parent,omitempty"`
	Phase         tatarav1.TaskPhase       `json:"phase,omitempty"`
	PodName       string                   `json:"podName,omitempty"`
	Outcome       *tatarav1.TaskOutcome    `json:"outcome,omitempty"`
	ChangeSummary string                   `json:"changeSummary,omitempty"`
	Cancelled     bool                     `json:"cancelled,omitempty"`
	Activity      []tatarav1.ActivityEntry `json:"activity,omitempty"`
	Notes         []tatarav1.ActivityEntry `json:"notes,omitempty"`
	NotesDropped  int64                    `json:"notesDropped,omitempty"`
	Conditions    []metav1.Condition       `json:"conditions,omitempty"`
	CreatedAt     metav1.Time              `json:"createdAt"`
}

// ViewOf is what a Task shows of itself (task_get).
func ViewOf(t *tatarav1.Task) TaskView {
	return TaskView{
		Name: t.Name, Kind: t.Spec.Kind, Project: t.Spec.ProjectRef.Name, Repo: t.Spec.Repo,
		Directive: t.Spec.Directive, Parent: t.Spec.Parent, Phase: t.Status.Phase, PodName: t.Status.PodName,
		Outcome: t.Status.Outcome, ChangeSummary: t.Status.ChangeSummary, Cancelled: t.Spec.Cancel != nil,
		Activity: t.Status.Activity, Notes: t.Status.Notes, NotesDropped: t.Status.NotesDropped, Conditions: t.Status.Conditions, CreatedAt: t.CreationTimestamp,
	}
}

// subtaskView is what parent sees of its subtask sub. A review shows neither its activity, notes
// nor outcome until it ends: the Task that asked for it (whose branch, or whose delegate's, it
// reviews) must not watch it as it is written and react to it (ask for another, steer the next
// one) before the verdict stands.
func subtaskView(parent, sub *tatarav1.Task) TaskView {
	v := ViewOf(sub)
	if isReview(sub.Spec.Kind) && sub.Spec.Parent == parent.Name && !sub.Status.Phase.Terminal() {
		v.Activity, v.Notes, v.Outcome = nil, nil, nil
	}
	return v
}
