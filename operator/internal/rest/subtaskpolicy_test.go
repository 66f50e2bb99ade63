package api

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// subset reports whether every tool of child is also a tool of parent, per the authorization table.
func subset(child, parent tatarav1.TaskKind) bool {
	for _, tool := range AllowedTools(child) {
		if !Allowed(parent, tool) {
			return false
		}
	}
	return true
}

// TestSubtaskPolicyObeysTheRule: every pair the table allows gives the child no operator tool
// its parent lacks, or is the named review exception; and only kinds that may call
// subtask_create have a non-empty row.
func TestSubtaskPolicyObeysTheRule(t *testing.T) {
	for parent, children := range subtaskPolicy {
		if len(children) > 0 && !Allowed(parent, ToolSubtaskCreate) {
			t.Errorf("kind %q may create subtasks in the policy but may not call %s", parent, ToolSubtaskCreate)
		}
		for _, child := range children {
			if !child.Valid() {
				t.Errorf("kind %q may create %q, which is not a Task kind", parent, child)
				continue
			}
			if subset(child, parent) || subtaskRuleException(parent, child) {
				continue
			}
			var extra []string
			for _, tool := range AllowedTools(child) {
				if !Allowed(parent, tool) {
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
		if !Allowed(parent, ToolSubtaskCreate) {
			continue
		}
		for _, child := range tatarav1.TaskKinds {
			if (subset(child, parent) || subtaskRuleException(parent, child)) && !SubtaskAllowed(parent, child) {
				t.Errorf("the rule permits %q under %q but the table refuses it; name the restriction here if it is deliberate", child, parent)
			}
		}
	}
}

func TestSubtaskPolicyCoversEveryKind(t *testing.T) {
	for _, kind := range tatarav1.TaskKinds {
		if _, ok := subtaskPolicy[kind]; !ok {
			t.Errorf("kind %q has no row in the subtask policy", kind)
		}
	}
	if len(subtaskPolicy) != len(tatarav1.TaskKinds) {
		t.Errorf("the policy has %d rows for %d kinds", len(subtaskPolicy), len(tatarav1.TaskKinds))
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
	if !SubtaskAllowed(tatarav1.KindImplement, tatarav1.KindReview) || !SubtaskAllowed(tatarav1.KindIssueLifecycle, tatarav1.KindReview) {
		t.Fatal("review must be allowed under implement and issueLifecycle")
	}
	for _, parent := range tatarav1.TaskKinds {
		if parent != tatarav1.KindImplement && parent != tatarav1.KindIssueLifecycle && subtaskRuleException(parent, tatarav1.KindReview) {
			t.Errorf("the review exception covers %q", parent)
		}
	}
}

func TestSubtaskAllowedFailsClosed(t *testing.T) {
	tests := []struct {
		name          string
		parent, child tatarav1.TaskKind
		want          bool
	}{
		{"implement asks for a review", tatarav1.KindImplement, tatarav1.KindReview, true},
		{"implement splits its work", tatarav1.KindImplement, tatarav1.KindImplement, true},
		{"implement may not escalate to issueLifecycle", tatarav1.KindImplement, tatarav1.KindIssueLifecycle, false},
		{"implement may not triage", tatarav1.KindImplement, tatarav1.KindTriageIssue, false},
		{"implement may not self-improve", tatarav1.KindImplement, tatarav1.KindSelfImprove, false},
		{"issueLifecycle delegates an implement", tatarav1.KindIssueLifecycle, tatarav1.KindImplement, true},
		{"issueLifecycle may not brainstorm", tatarav1.KindIssueLifecycle, tatarav1.KindBrainstorm, false},
		{"issueLifecycle may not open an incident", tatarav1.KindIssueLifecycle, tatarav1.KindIncident, false},
		{"review creates nothing", tatarav1.KindReview, tatarav1.KindReview, false},
		{"unknown parent", "deploy", tatarav1.KindReview, false},
		{"unknown child", tatarav1.KindImplement, "deploy", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SubtaskAllowed(tt.parent, tt.child); got != tt.want {
				t.Fatalf("SubtaskAllowed(%q, %q) = %v, want %v", tt.parent, tt.child, got, tt.want)
			}
		})
	}
}

func TestCheckSubtaskKindNamesTheAllowedKinds(t *testing.T) {
	err := checkSubtaskKind(tatarav1.KindImplement, tatarav1.KindIssueLifecycle)
	if err == nil || err.status != http.StatusForbidden {
		t.Fatalf("checkSubtaskKind = %v, want 403", err)
	}
	want := `subtask kind "issueLifecycle" is not allowed under a "implement" Task (allowed: implement, review)`
	if err.msg != want {
		t.Fatalf("message %q, want %q", err.msg, want)
	}
	if err := checkSubtaskKind(tatarav1.KindReview, tatarav1.KindReview); err == nil || !strings.Contains(err.msg, "(allowed: none)") {
		t.Fatalf("review parent: %v", err)
	}
}

func TestCheckSubtaskLimits(t *testing.T) {
	parent := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: tatarav1.TaskSpec{ProjectRef: tatarav1.ProjectReference{Name: "p"}}}
	tests := []struct {
		name                    string
		depth, children, active int
		maxActive               int32
		want                    string // "" for allowed; else a substring of the 429
	}{
		{"a root creates", 0, 0, 1, 50, ""},
		{"a child creates a grandchild", 1, 0, 1, 50, ""},
		{"a grandchild may not", 2, 0, 1, 50, "MaxSubtaskDepth 2"},
		{"nine children leave room", 0, MaxChildrenPerTask - 1, 1, 50, ""},
		{"ten children are the limit", 0, MaxChildrenPerTask, 1, 50, "MaxChildrenPerTask is 10"},
		{"active below the limit", 0, 0, 6, 7, ""},
		{"active at the limit", 0, 0, 6, 6, "spec.maxActiveTasks is 6"},
		{"0 means the default", 0, 0, tatarav1.DefaultMaxActiveTasks, 0, "spec.maxActiveTasks is 50"},
		{"depth is checked first", 2, MaxChildrenPerTask, 99, 1, "MaxSubtaskDepth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSubtaskLimits(parent, tt.depth, tt.children, tt.active, tt.maxActive)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("allowed, want 429 %q", tt.want)
			case tt.want != "" && (err.status != http.StatusTooManyRequests || !strings.Contains(err.msg, tt.want)):
				t.Fatalf("got %d %q, want 429 containing %q", err.status, err.msg, tt.want)
			}
		})
	}
}
