package api

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func TestApplyIntent(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 6, 23, 12, 0, 0, 0, time.UTC))
	type call struct {
		tool string
		req  intentRequest
		want string // result
	}
	opened := &prOutcomeRequest{Outcome: "opened", URL: "https://example.test/pr/1"}
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
				{ToolChangeSummary, &changeSummaryRequest{Summary: "fix flake"}, resultRecorded},
				{ToolPROutcome, opened, resultRecorded},
			},
			wantOutcome: ToolPROutcome, wantSummary: "fix flake",
		},
		{
			name: "change_summary does not end the task and is idempotent",
			calls: []call{
				{ToolChangeSummary, &changeSummaryRequest{Summary: "a"}, resultRecorded},
				{ToolChangeSummary, &changeSummaryRequest{Summary: "a"}, resultIdempotent},
			},
			wantSummary: "a",
		},
		{
			name: "a different change_summary conflicts",
			calls: []call{
				{ToolChangeSummary, &changeSummaryRequest{Summary: "a"}, resultRecorded},
				{ToolChangeSummary, &changeSummaryRequest{Summary: "b"}, resultConflict},
			},
			wantSummary: "a",
		},
		{
			name: "same outcome intent, same body: idempotent",
			calls: []call{
				{ToolPROutcome, opened, resultRecorded},
				{ToolPROutcome, &prOutcomeRequest{Outcome: "opened", URL: "https://example.test/pr/1"}, resultIdempotent},
			},
			wantOutcome: ToolPROutcome,
		},
		{
			name: "same outcome intent, different body: the later body stands",
			calls: []call{
				{ToolPROutcome, opened, resultRecorded},
				{ToolPROutcome, &prOutcomeRequest{Outcome: "merged"}, resultReplaced},
			},
			wantOutcome: ToolPROutcome, wantValue: "merged",
		},
		{
			name: "a different outcome intent: the last one stands",
			calls: []call{
				{ToolDeclineImplementation, &declineRequest{Reason: "out of scope"}, resultRecorded},
				{ToolAlreadyDone, &alreadyDoneRequest{Evidence: "merged in #3"}, resultReplaced},
				{ToolPROutcome, opened, resultReplaced},
			},
			wantOutcome: ToolPROutcome, wantValue: "opened",
		},
		{
			// Code from the branch under review records approve before the reviewer reads anything.
			name: "a verdict recorded first does not pre-empt the reviewer's later one",
			calls: []call{
				{ToolReviewVerdict, &reviewVerdictRequest{Verdict: "approve", Summary: "lgtm"}, resultRecorded},
				{ToolReviewVerdict, &reviewVerdictRequest{Verdict: "request_changes", Summary: "the hook"}, resultReplaced},
			},
			wantOutcome: ToolReviewVerdict, wantValue: "request_changes",
		},
		{
			name: "change_summary after an outcome is still accepted",
			calls: []call{
				{ToolReviewVerdict, &reviewVerdictRequest{Verdict: "approve", Summary: "lgtm"}, resultRecorded},
				{ToolChangeSummary, &changeSummaryRequest{Summary: "s"}, resultRecorded},
			},
			wantOutcome: ToolReviewVerdict, wantSummary: "s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st tatarav1.TaskStatus
			for i, c := range tt.calls {
				body, err := canonical(c.req)
				if err != nil {
					t.Fatal(err)
				}
				before := st.DeepCopy()
				got, apiErr := applyIntent(&st, c.tool, c.req, body, now)
				if got != c.want {
					t.Fatalf("call %d (%s): result %q, want %q", i, c.tool, got, c.want)
				}
				if (got == resultConflict) != (apiErr != nil && apiErr.status == http.StatusConflict) {
					t.Fatalf("call %d: conflict result must come with a 409, got %v", i, apiErr)
				}
				changed := got == resultRecorded || got == resultReplaced
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
	req := &issueOutcomeRequest{Outcome: "duplicate", Summary: "dup of #4"}
	body, _ := canonical(req)
	if _, err := applyIntent(&st, ToolIssueOutcome, req, body, metav1.Now()); err != nil {
		t.Fatal(err)
	}
	if st.Outcome.Value != "duplicate" || st.Outcome.Body != `{"outcome":"duplicate","summary":"dup of #4"}` {
		t.Fatalf("outcome %+v", st.Outcome)
	}
}
