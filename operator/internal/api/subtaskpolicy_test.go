package api

import (
	"net/http"
	"slices"
	"strconv"
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

func task(name, parent, project string, phase tatarav1.TaskPhase) tatarav1.Task {
	return tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindImplement, Parent: parent, ProjectRef: tatarav1.ProjectReference{Name: project}},
		Status:     tatarav1.TaskStatus{Phase: phase},
	}
}

func TestCheckSubtaskLimits(t *testing.T) {
	root := task("root", "", "p", tatarav1.PhaseRunning)
	child := task("child", "root", "p", tatarav1.PhaseRunning)
	grandchild := task("grandchild", "child", "p", tatarav1.PhaseRunning)
	orphan := task("orphan", "gone", "p", tatarav1.PhaseRunning)
	loopA, loopB := task("a", "b", "p", ""), task("b", "a", "p", "")
	base := []tatarav1.Task{root, child, grandchild, orphan, loopA, loopB}

	children := func(parent string, n int, phase tatarav1.TaskPhase) []tatarav1.Task {
		var out []tatarav1.Task
		for i := range n {
			out = append(out, task(parent+"-c"+strconv.Itoa(i), parent, "p", phase))
		}
		return out
	}
	others := func(n int, project string, phase tatarav1.TaskPhase) []tatarav1.Task {
		var out []tatarav1.Task
		for i := range n {
			out = append(out, task(project+"-o"+strconv.Itoa(i), "", project, phase))
		}
		return out
	}
	tests := []struct {
		name      string
		parent    tatarav1.Task
		extra     []tatarav1.Task
		maxActive int32
		want      string // "" for allowed; else a substring of the 429
	}{
		{"a root creates", root, nil, 50, ""},
		{"a child creates a grandchild", child, nil, 50, ""},
		{"a grandchild may not", grandchild, nil, 50, "MaxSubtaskDepth 2"},
		{"an orphan counts as depth 1", orphan, nil, 50, ""},
		{"a hand-written cycle ends", loopA, nil, 50, "MaxSubtaskDepth 2"},
		{"nine children leave room", root, children("root", MaxChildrenPerTask-2, tatarav1.PhaseRunning), 50, ""}, // + child
		{"ten children are the limit", root, children("root", MaxChildrenPerTask-1, tatarav1.PhaseRunning), 50, "MaxChildrenPerTask is 10"},
		{"finished children count", root, children("root", MaxChildrenPerTask-1, tatarav1.PhaseCancelled), 50, "MaxChildrenPerTask is 10"},
		{"active below the limit", root, nil, 7, ""},
		{"active at the limit", root, nil, 6, "spec.maxActiveTasks is 6"},
		{"empty phase is active", root, others(1, "p", ""), 7, "spec.maxActiveTasks is 7"},
		{"terminal Tasks are not active", root, others(5, "p", tatarav1.PhaseSucceeded), 7, ""},
		{"other projects do not count", root, others(5, "q", tatarav1.PhaseRunning), 7, ""},
		{"0 means the default", root, others(tatarav1.DefaultMaxActiveTasks-6, "p", tatarav1.PhasePending), 0, "spec.maxActiveTasks is 50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := append(slices.Clone(base), tt.extra...)
			err := checkSubtaskLimits(&tt.parent, tasks, tt.maxActive)
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
