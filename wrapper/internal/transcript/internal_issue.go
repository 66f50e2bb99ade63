package transcript

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"tatara.dev/cli/pkg/profiles"
)

// internalIssueToolName is how the agent CLI names the cli's report_internal_issue tool:
// mcp__<server>__<tool>, with <server> the key the wrapper writes into the MCP config
// (agent.MCPServerName). If either name changes, the wrapper silently stops seeing reports;
// TestInternalIssueToolName ties them together.
const internalIssueToolName = "mcp__tatara__report_internal_issue"

// Enum values of report_internal_issue, as the cli declares them (profiles.IssueCategories and
// IssueSeverities are the one source). Anything else is clamped, which bounds the counter's label
// cardinality whatever the model sends.
var (
	issueCategories = setOf(profiles.IssueCategories())
	issueSeverities = setOf(profiles.IssueSeverities())
)

func setOf(values []string) map[string]bool {
	set := make(map[string]bool, len(values))
	for _, v := range values {
		set[v] = true
	}
	return set
}

// InternalIssueLabels returns every {category, severity} pair the counter can carry, sorted, so
// the caller can create each series at 0: an increase() alert then fires on the first report of
// a short-lived agent pod instead of needing a sample before it.
func InternalIssueLabels() [][2]string {
	var pairs [][2]string
	for c := range issueCategories {
		for s := range issueSeverities {
			pairs = append(pairs, [2]string{c, s})
		}
	}
	slices.SortFunc(pairs, func(a, b [2]string) int {
		return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
	})
	return pairs
}

// What an unknown category or an unknown or missing severity becomes. Both are members of the
// cli's enums (TestInternalIssueEnumsAreTheCLIs); "error" is also the cli's default severity.
const (
	defaultCategory = "other"
	defaultSeverity = "error"
)

type internalIssueInput struct {
	Category      string `json:"category"`
	Severity      string `json:"severity"`
	Description   string `json:"description"`
	OffendingTool string `json:"offending_tool"`
	ResourceID    string `json:"resource_id"`
}

func clampCategory(s string) string {
	if issueCategories[s] {
		return s
	}
	return defaultCategory
}

func clampSeverity(s string) string {
	if issueSeverities[s] {
		return s
	}
	return defaultSeverity
}

// emitInternalIssue logs one report_internal_issue call seen in the transcript and counts it.
// input is the tool_use input, already redacted; inputErr says why there is none. The signal is
// never dropped: an input that does not decode is logged at ERROR with parse_error and counted
// as other/error.
func (t *Tailer) emitInternalIssue(turnID, toolUseID string, input []byte, inputErr error) {
	t.mu.Lock()
	t.sum.InternalIssues++
	t.mu.Unlock()
	var in internalIssueInput
	parseErr := inputErr
	if parseErr == nil {
		parseErr = json.Unmarshal(input, &in)
	}
	base := []slog.Attr{
		slog.String("action", "internal_issue_report"),
		slog.String("turn_id", t.clean(turnID)),
		slog.String("tool_use_id", t.clean(toolUseID)),
	}
	if parseErr != nil {
		t.log.LogAttrs(context.Background(), slog.LevelError, "internal issue reported",
			append(base,
				slog.String("category", defaultCategory),
				slog.String("severity", defaultSeverity),
				slog.String("parse_error", t.clean(parseErr.Error())),
			)...)
		t.countIssue(defaultCategory, defaultSeverity)
		return
	}
	category, severity := clampCategory(in.Category), clampSeverity(in.Severity)
	level := slog.LevelError
	if severity == "warn" {
		level = slog.LevelWarn
	}
	attrs := append(base,
		slog.String("category", category),
		slog.String("severity", severity),
		slog.String("description", t.clean(in.Description)),
		slog.String("offending_tool", t.clean(in.OffendingTool)),
		slog.String("resource_id", t.clean(in.ResourceID)),
	)
	if category != in.Category {
		attrs = append(attrs, slog.String("raw_category", t.clean(in.Category)))
	}
	if severity != in.Severity && in.Severity != "" {
		attrs = append(attrs, slog.String("raw_severity", t.clean(in.Severity)))
	}
	t.log.LogAttrs(context.Background(), level, "internal issue reported", attrs...)
	t.countIssue(category, severity)
}

func (t *Tailer) countIssue(category, severity string) {
	if t.issueCounter != nil {
		t.issueCounter.WithLabelValues(category, severity).Inc()
	}
}
