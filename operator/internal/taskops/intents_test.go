package taskops

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// The intent tools these tests record (rest's Tool* names). Each Intent's Body is the canonical
// JSON rest computes from the request (rest's TestIntentOf checks that side).
const (
	toolPROutcome             = "pr_outcome"
	toolReviewVerdict         = "review_verdict"
	toolIssueOutcome          = "issue_outcome"
	toolDeclineImplementation = "decline_implementation"
	toolAlreadyDone           = "already_done"
)

func TestApplyIntent(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 6, 23, 12, 0, 0, 0, time.UTC))
	type call struct {
		in   Intent
		want string // result
	}
	summary := func(s string) Intent {
		return Intent{Tool: IntentChangeSummary, Summary: s, Body: `{"summary":"` + s + `"}`}
	}
	opened := Intent{Tool: toolPROutcome, Value: "opened", Summary: "https://example.test/pr/1", Body: `{"outcome":"opened","url":"https://example.test/pr/1"}`}
	verdict := func(v, s string) Intent {
		return Intent{Tool: toolReviewVerdict, Value: v, Summary: s, Body: `{"verdict":"` + v + `","summary":"` + s + `"}`}
	}
	tests := []struct {
		name        string
		calls       []call
		wantOutcome string // intent name of the final outcome, "" for none
		wantValue   string // its value, checked when set
		wantSummary string
	}{
		{
			name: "change_summary then pr_outcome (implement's usual path)",
			calls: []call{
				{summary("fix flake"), ResultRecorded},
				{opened, ResultRecorded},
			},
			wantOutcome: toolPROutcome, wantSummary: "fix flake",
		},
		{
			name: "change_summary does not end the task and is idempotent",
			calls: []call{
				{summary("a"), ResultRecorded},
				{summary("a"), ResultIdempotent},
			},
			wantSummary: "a",
		},
		{
			name: "a different change_summary conflicts",
			calls: []call{
				{summary("a"), ResultRecorded},
				{summary("b"), ResultConflict},
			},
			wantSummary: "a",
		},
		{
			name: "same outcome intent, same body: idempotent",
			calls: []call{
				{opened, ResultRecorded},
				{Intent{Tool: toolPROutcome, Value: "opened", Summary: "https://example.test/pr/1", Body: `{"outcome":"opened","url":"https://example.test/pr/1"}`}, ResultIdempotent},
			},
			wantOutcome: toolPROutcome,
		},
		{
			name: "same outcome intent, different body: the later body stands",
			calls: []call{
				{opened, ResultRecorded},
				{Intent{Tool: toolPROutcome, Value: "merged", Body: `{"outcome":"merged"}`}, ResultReplaced},
			},
			wantOutcome: toolPROutcome, wantValue: "merged",
		},
		{
			name: "a different outcome intent: the last one stands",
			calls: []call{
				{Intent{Tool: toolDeclineImplementation, Summary: "out of scope", Body: `{"reason":"out of scope"}`}, ResultRecorded},
				{Intent{Tool: toolAlreadyDone, Summary: "merged in #3", Body: `{"evidence":"merged in #3"}`}, ResultReplaced},
				{opened, ResultReplaced},
			},
			wantOutcome: toolPROutcome, wantValue: "opened",
		},
		{
			// Code from the branch under review records approve before the reviewer reads anything.
			name: "a verdict recorded first does not pre-empt the reviewer's later one",
			calls: []call{
				{verdict("approve", "lgtm"), ResultRecorded},
				{verdict("request_changes", "the hook"), ResultReplaced},
			},
			wantOutcome: toolReviewVerdict, wantValue: "request_changes",
		},
		{
			name: "change_summary after an outcome is still accepted",
			calls: []call{
				{verdict("approve", "lgtm"), ResultRecorded},
				{summary("s"), ResultRecorded},
			},
			wantOutcome: toolReviewVerdict, wantSummary: "s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st tatarav1.TaskStatus
			for i, c := range tt.calls {
				before := st.DeepCopy()
				got, err := applyIntent(&st, c.in, now)
				if got != c.want {
					t.Fatalf("call %d (%s): result %q, want %q", i, c.in.Tool, got, c.want)
				}
				if (got == ResultConflict) != (err != nil && err.Code == Conflict) {
					t.Fatalf("call %d: conflict result must come with a Conflict, got %v", i, err)
				}
				changed := got == ResultRecorded || got == ResultReplaced
				if !changed && len(st.Activity) != len(before.Activity) {
					t.Fatalf("call %d: a %s call must not change the status", i, got)
				}
				if changed && len(st.Activity) != len(before.Activity)+1 {
					t.Fatalf("call %d: a %s call must add one activity entry, have %d after %d", i, got, len(st.Activity), len(before.Activity))
				}
			}
			gotOutcome := ""
			if st.Outcome != nil {
				gotOutcome = st.Outcome.Intent
			}
			if gotOutcome != tt.wantOutcome || st.ChangeSummary != tt.wantSummary {
				t.Fatalf("outcome %q summary %q, want %q %q", gotOutcome, st.ChangeSummary, tt.wantOutcome, tt.wantSummary)
			}
			if tt.wantValue != "" && st.Outcome.Value != tt.wantValue {
				t.Fatalf("outcome value %q, want %q", st.Outcome.Value, tt.wantValue)
			}
		})
	}
}

func TestOutcomeValueRecorded(t *testing.T) {
	var st tatarav1.TaskStatus
	in := Intent{Tool: toolIssueOutcome, Value: "duplicate", Summary: "dup of #4", Body: `{"outcome":"duplicate","summary":"dup of #4"}`}
	if _, err := applyIntent(&st, in, metav1.Now()); err != nil {
		t.Fatal(err)
	}
	if st.Outcome.Value != "duplicate" || st.Outcome.Body != `{"outcome":"duplicate","summary":"dup of #4"}` {
		t.Fatalf("outcome %+v", st.Outcome)
	}
}
