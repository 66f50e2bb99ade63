package taskops

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// The tests of the subtask policy against the authorization table (rest's) are in
// subtaskrule_test.go.

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
	if err == nil || err.Code != Forbidden {
		t.Fatalf("checkSubtaskKind = %v, want Forbidden (403)", err)
	}
	want := `subtask kind "issueLifecycle" is not allowed under a "implement" Task (allowed: implement, review)`
	if err.Message != want {
		t.Fatalf("message %q, want %q", err.Message, want)
	}
	if err := checkSubtaskKind(tatarav1.KindReview, tatarav1.KindReview); err == nil || !strings.Contains(err.Message, "(allowed: none)") {
		t.Fatalf("review parent: %v", err)
	}
}

func TestCheckSubtaskLimits(t *testing.T) {
	parent := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: tatarav1.TaskSpec{ProjectRef: tatarav1.ProjectReference{Name: "p"}}}
	tests := []struct {
		name                    string
		depth, children, active int
		maxActive               int32
		want                    string // "" for allowed; else a substring of the LimitReached (429)
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
				t.Fatalf("allowed, want LimitReached (429) %q", tt.want)
			case tt.want != "" && (err.Code != LimitReached || !strings.Contains(err.Message, tt.want)):
				t.Fatalf("got %s %q, want LimitReached (429) containing %q", err.Code, err.Message, tt.want)
			}
		})
	}
}
