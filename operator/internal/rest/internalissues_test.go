package rest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/pkg/internalissue"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/metrics"
	"tatara.dev/operator/internal/taskops"
)

const reportPath = "/api/v1/tasks/t/internal-issues"

// TestReportInternalIssueAnswers: the route's answers, from a new record to each refusal.
func TestReportInternalIssueAnswers(t *testing.T) {
	f := newFixture(t)
	s, _ := f.server(t, Options{}, f.running.DeepCopy())
	valid := `{"category":"tool_error","severity":"warn","description":"memory_search timed out","offending_tool":"memory_search"}`
	tests := []struct {
		name, path, body string
		want             int
		wantIn           string
	}{
		{"a new group", reportPath, valid, http.StatusCreated, `"result":"new"`},
		{"the same group", reportPath, valid, http.StatusOK, `"count":2`},
		{"no severity is error", reportPath, `{"category":"auth","description":"401 from memory"}`, http.StatusCreated, `"result":"new"`},
		{"unknown category", reportPath, `{"category":"bug","description":"x"}`, http.StatusBadRequest, `field \"category\" is \"bug\"`},
		{"unknown severity", reportPath, `{"category":"auth","severity":"fatal","description":"x"}`, http.StatusBadRequest, `field \"severity\"`},
		{"no description", reportPath, `{"category":"auth","description":"  "}`, http.StatusBadRequest, `field \"description\" is required`},
		{"description too long", reportPath, `{"category":"auth","description":"` + strings.Repeat("x", internalissue.MaxDescriptionBytes+1) + `"}`,
			http.StatusBadRequest, `want at most 8192`},
		{"tool name too long", reportPath, `{"category":"auth","description":"x","offending_tool":"` + strings.Repeat("t", 257) + `"}`,
			http.StatusBadRequest, `field \"offending_tool\"`},
		{"unknown field", reportPath, `{"category":"auth","description":"x","labels":{"a":"b"}}`, http.StatusBadRequest, "labels"},
		{"another Task's path", "/api/v1/tasks/other/internal-issues", valid, http.StatusForbidden, `not \"other\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := f.post(s, tt.path, tt.body)
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.wantIn) {
				t.Fatalf("POST %s: %d %s, want %d containing %s", tt.path, w.Code, w.Body, tt.want, tt.wantIn)
			}
		})
	}
}

// TestReportInternalIssueRateLimit: a Task's reports past its burst are refused with 429 and
// Retry-After, and counted as rate_limited; they cost none of the Task's other calls' budget.
func TestReportInternalIssueRateLimit(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	m := metrics.NewMetrics(reg)
	s, _ := f.server(t, Options{Metrics: m, InternalIssueRateLimit: RateLimit{PerSecond: 0.001, Burst: 2}}, f.running.DeepCopy())
	body := `{"category":"other","description":"flood"}`
	for i, want := range []int{http.StatusCreated, http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		w := f.post(s, reportPath, body)
		if w.Code != want {
			t.Fatalf("report %d: %d %s, want %d", i, w.Code, w.Body, want)
		}
		if want == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
			t.Fatalf("report %d: 429 without Retry-After", i)
		}
	}
	if got := testutil.ToFloat64(m.InternalIssueReports.WithLabelValues(ReportResultRateLimited)); got != 2 {
		t.Errorf("rate_limited reports = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.InternalIssueReports.WithLabelValues(taskops.ReportCounted)); got != 1 {
		t.Errorf("counted reports = %v, want 1", got)
	}
	if w := f.post(s, "/api/v1/tasks/t/notes", `{"text":"still working"}`); w.Code != http.StatusCreated {
		t.Fatalf("a note after the reports' limit: %d %s, want 201", w.Code, w.Body)
	}
}

// TestReportInternalIssueIdempotencyKey: a report sent again with its key answers as counted
// once.
func TestReportInternalIssueIdempotencyKey(t *testing.T) {
	f := newFixture(t)
	s, _ := f.server(t, Options{}, f.running.DeepCopy())
	body := `{"category":"other","description":"once"}`
	f.postKeyed(s, reportPath, body, "report-1")
	w := f.postKeyed(s, reportPath, body, "report-1")
	var got taskops.InternalIssueRecorded
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || got.Result != taskops.ReportDuplicate || got.Count != 1 {
		t.Fatalf("the same key again: %d %s, want 200 duplicate with count 1", w.Code, w.Body)
	}
}

// TestEveryKindMayReport: the report route is open to every kind of Task (the tool is in every
// profile) and closed to a kind outside the table.
func TestEveryKindMayReport(t *testing.T) {
	for _, kind := range tatarav1.TaskKinds {
		if !Allowed(kind, ToolReportInternalIssue) {
			t.Errorf("kind %s may not report", kind)
		}
	}
	if Allowed("unknown", ToolReportInternalIssue) {
		t.Error("an unknown kind may report")
	}
}
