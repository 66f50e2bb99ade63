package taskops

import (
	"slices"
	"strings"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// subtaskPolicy is the server-side table of which child kinds a Task may create with
// subtask_create, per parent kind. Like the authorization table it is written out in full and
// nothing is derived from it at runtime.
//
// The rule it follows: a child's operator tools (rest.AllowedTools(child), the authorization
// table) are a subset of its parent's, so a subtask can never do more than the Task that created it. The one exception is
// review: an implement Task may ask for a review of its own change, and a review may record
// review_verdict, which implement may not. Under issueLifecycle, review is a subset anyway.
//
// The table is maximal: for each kind that may call subtask_create (implement, issueLifecycle),
// it lists every child kind the rule permits, and nothing is restricted beyond the rule. Kinds
// without subtask_create in the authorization table have an empty row: their calls are refused
// with 403 before any decision is asked, so a row there would only be dead permission.
// TestSubtaskPolicyObeysTheRule and TestSubtaskPolicyIsMaximal prove both.
var subtaskPolicy = map[tatarav1.TaskKind][]tatarav1.TaskKind{
	tatarav1.KindImplement: {
		tatarav1.KindImplement, tatarav1.KindReview,
	},
	tatarav1.KindReview:      {},
	tatarav1.KindTriageIssue: {},
	tatarav1.KindBrainstorm:  {},
	tatarav1.KindIssueLifecycle: {
		tatarav1.KindImplement, tatarav1.KindReview, tatarav1.KindTriageIssue, tatarav1.KindIssueLifecycle,
	},
	tatarav1.KindIncident:    {},
	tatarav1.KindSelfImprove: {},
}

// subtaskRuleException is the one pair allowed although the child's tools are not a subset of
// the parent's: review under implement (see subtaskPolicy).
func subtaskRuleException(parent, child tatarav1.TaskKind) bool {
	return child == tatarav1.KindReview && (parent == tatarav1.KindImplement || parent == tatarav1.KindIssueLifecycle)
}

// SubtaskAllowed reports whether a Task of kind parent may create a subtask of kind child. A
// parent kind outside the table may create nothing.
func SubtaskAllowed(parent, child tatarav1.TaskKind) bool {
	return slices.Contains(subtaskPolicy[parent], child)
}

// AllowedSubtaskKinds returns the sorted child kinds a Task of that kind may create.
func AllowedSubtaskKinds(parent tatarav1.TaskKind) []tatarav1.TaskKind {
	out := slices.Clone(subtaskPolicy[parent])
	slices.Sort(out)
	return out
}

const (
	// MaxSubtaskDepth bounds how deep a tree of subtasks grows: a root Task (no spec.parent)
	// is depth 0, its child depth 1, a grandchild depth 2; a subtask deeper than this is
	// refused. 2 is the deepest chain the workflows need: an issueLifecycle delegates an
	// implement, and that implement asks for a review. Each extra level multiplies what one
	// root can spawn by MaxChildrenPerTask.
	MaxSubtaskDepth = 2

	// MaxChildrenPerTask bounds the subtasks one Task may create over its whole life, counting
	// every Task whose spec.parent names it, terminal ones included, so cancelling children
	// does not free room and a create/cancel loop cannot churn. 10 covers splitting a change
	// into a few parts plus a review or two and some retries. With MaxSubtaskDepth 2 one root
	// can spawn at most 10 + 10*10 = 110 Tasks, and the Project's spec.maxActiveTasks bounds
	// how many of those run at once.
	MaxChildrenPerTask = 10
)

// checkSubtaskKind is the per-kind policy: Forbidden when the parent's kind may not create child.
func checkSubtaskKind(parent, child tatarav1.TaskKind) *Error {
	if SubtaskAllowed(parent, child) {
		return nil
	}
	allowed := []string{}
	for _, k := range AllowedSubtaskKinds(parent) {
		allowed = append(allowed, string(k))
	}
	list := strings.Join(allowed, ", ")
	if list == "" {
		list = "none"
	}
	return errorf(Forbidden, "subtask kind %q is not allowed under a %q Task (allowed: %s)", child, parent, list)
}

// checkSubtaskLimits checks, in order, MaxSubtaskDepth, MaxChildrenPerTask and the Project's
// maxActiveTasks for a new subtask of parent, at depth (0 for a root Task) with children
// subtasks already created (finished ones count) and active Tasks in its Project (not
// Succeeded, Failed or Cancelled). Each refusal is LimitReached and names the limit and its value.
func checkSubtaskLimits(parent *tatarav1.Task, depth, children, active int, maxActiveTasks int32) *Error {
	if depth+1 > MaxSubtaskDepth {
		return errorf(LimitReached,
			"subtask refused: task %q is at depth %d or deeper (a root Task's child is depth 1), so its subtask would pass MaxSubtaskDepth %d",
			parent.Name, depth, MaxSubtaskDepth)
	}
	if children >= MaxChildrenPerTask {
		return errorf(LimitReached,
			"subtask refused: task %q has already created %d subtasks (finished ones count), MaxChildrenPerTask is %d",
			parent.Name, children, MaxChildrenPerTask)
	}
	if maxActiveTasks <= 0 {
		maxActiveTasks = tatarav1.DefaultMaxActiveTasks
	}
	if active >= int(maxActiveTasks) {
		return errorf(LimitReached,
			"subtask refused: project %q has %d active Tasks (not Succeeded, Failed or Cancelled), its spec.maxActiveTasks is %d",
			parent.Spec.ProjectRef.Name, active, maxActiveTasks)
	}
	return nil
}
