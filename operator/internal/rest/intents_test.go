package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tatara.dev/operator/internal/taskops"
)

// TestIntentOf: a decoded intent body becomes the taskops.Intent it records: its tool, its enum
// value, the summary its activity entry shows, and its body as canonical JSON, whatever the
// request's whitespace and key order (taskops' TestApplyIntent takes it from there).
func TestIntentOf(t *testing.T) {
	tests := []struct {
		tool, body string
		want       taskops.Intent
	}{
		{ToolIssueOutcome, `{ "summary": "dup of #4",  "outcome": "duplicate" }`,
			taskops.Intent{Tool: ToolIssueOutcome, Value: "duplicate", Summary: "dup of #4", Body: `{"outcome":"duplicate","summary":"dup of #4"}`}},
		{ToolPROutcome, `{"url":"https://example.test/pr/1","outcome":"opened"}`,
			taskops.Intent{Tool: ToolPROutcome, Value: "opened", Summary: "https://example.test/pr/1", Body: `{"outcome":"opened","url":"https://example.test/pr/1"}`}},
		{ToolPROutcome, `{"outcome":"merged","summary":"landed"}`,
			taskops.Intent{Tool: ToolPROutcome, Value: "merged", Summary: "landed", Body: `{"outcome":"merged","summary":"landed"}`}},
		{ToolChangeSummary, `{"summary":"fix flake"}`,
			taskops.Intent{Tool: ToolChangeSummary, Summary: "fix flake", Body: `{"summary":"fix flake"}`}},
		{ToolReviewVerdict, `{"summary":"lgtm","verdict":"approve"}`,
			taskops.Intent{Tool: ToolReviewVerdict, Value: "approve", Summary: "lgtm", Body: `{"verdict":"approve","summary":"lgtm"}`}},
		{ToolDeclineImplementation, `{"reason":"out of scope"}`,
			taskops.Intent{Tool: ToolDeclineImplementation, Summary: "out of scope", Body: `{"reason":"out of scope"}`}},
		{ToolAlreadyDone, `{"evidence":"merged in #3"}`,
			taskops.Intent{Tool: ToolAlreadyDone, Summary: "merged in #3", Body: `{"evidence":"merged in #3"}`}},
		{ToolSkipResearch, `{"reason":"known area"}`,
			taskops.Intent{Tool: ToolSkipResearch, Summary: "known area", Body: `{"reason":"known area"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			req := newIntentRequest(tt.tool)
			if aerr := decodeBody(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body)), 1024, req); aerr != nil {
				t.Fatal(aerr)
			}
			got, err := intentOf(tt.tool, req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("intentOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
