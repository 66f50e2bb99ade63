package taskops_test

import (
	"testing"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/rest"
	"tatara.dev/operator/internal/taskops"
)

// The subtask policy's rule is stated over the authorization table, which is rest's: these tests
// read both (the table and the exception through export_test.go).

// subset reports whether every tool of child is also a tool of parent, per the authorization table.
func subset(child, parent tatarav1.TaskKind) bool {
	for _, tool := range rest.AllowedTools(child) {
		if !rest.Allowed(parent, tool) {
			return false
		}
	}
	return true
}

// TestSubtaskPolicyObeysTheRule: every pair the table allows gives the child no operator tool
// its parent lacks, or is the named review exception; and only kinds that may call
// subtask_create have a non-empty row.
func TestSubtaskPolicyObeysTheRule(t *testing.T) {
	for parent, children := range taskops.SubtaskPolicy {
		if len(children) > 0 && !rest.Allowed(parent, rest.ToolSubtaskCreate) {
			t.Errorf("kind %q may create subtasks in the policy but may not call %s", parent, rest.ToolSubtaskCreate)
		}
		for _, child := range children {
			if !child.Valid() {
				t.Errorf("kind %q may create %q, which is not a Task kind", parent, child)
				continue
			}
			if subset(child, parent) || taskops.SubtaskRuleException(parent, child) {
				continue
			}
			var extra []string
			for _, tool := range rest.AllowedTools(child) {
				if !rest.Allowed(parent, tool) {
					extra = append(extra, tool)
				}
			}
			t.Errorf("kind %q may create %q, which gains %v: not a subset and not the review exception", parent, child, extra)
		}
	}
}

// TestSubtaskPolicyIsMaximal: the table restricts nothing beyond the rule. For every kind that
// may call subtask_create, every child kind the rule permits is in its row.
func TestSubtaskPolicyIsMaximal(t *testing.T) {
	for _, parent := range tatarav1.TaskKinds {
		if !rest.Allowed(parent, rest.ToolSubtaskCreate) {
			continue
		}
		for _, child := range tatarav1.TaskKinds {
			if (subset(child, parent) || taskops.SubtaskRuleException(parent, child)) && !taskops.SubtaskAllowed(parent, child) {
				t.Errorf("the rule permits %q under %q but the table refuses it; name the restriction here if it is deliberate", child, parent)
			}
		}
	}
}

// TestSubtaskReviewException: review needs the exception under implement (review_verdict is
// not an implement tool) and not under issueLifecycle, where it is a subset.
func TestSubtaskReviewException(t *testing.T) {
	if subset(tatarav1.KindReview, tatarav1.KindImplement) {
		t.Fatal("review is a subset of implement: the exception is no longer needed, remove it")
	}
	if !subset(tatarav1.KindReview, tatarav1.KindIssueLifecycle) {
		t.Fatal("review is not a subset of issueLifecycle")
	}
	if !taskops.SubtaskAllowed(tatarav1.KindImplement, tatarav1.KindReview) || !taskops.SubtaskAllowed(tatarav1.KindIssueLifecycle, tatarav1.KindReview) {
		t.Fatal("review must be allowed under implement and issueLifecycle")
	}
	for _, parent := range tatarav1.TaskKinds {
		if parent != tatarav1.KindImplement && parent != tatarav1.KindIssueLifecycle && taskops.SubtaskRuleException(parent, tatarav1.KindReview) {
			t.Errorf("the review exception covers %q", parent)
		}
	}
}
