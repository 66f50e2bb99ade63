package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"tatara.dev/cli/pkg/internalissue"
)

// ReportInternalIssue is the platform self-report tool. The wrapper matches the
// agent-side name mcp__tatara__<this> in the transcript, so renaming it is a breaking change.
const ReportInternalIssue = "report_internal_issue"

// Issue categories and severities of report_internal_issue (pkg/internalissue holds them for the
// wrapper and the operator too).
var (
	IssueCategories = internalissue.Categories()
	IssueSeverities = internalissue.Severities()
)

// PlatformTools are the cross-cutting tools that run in the cli process itself.
func PlatformTools() []Tool {
	return []Tool{{
		Name: ReportInternalIssue, Group: GroupPlatform, Target: TargetLocal,
		Hints: Hints{},
		Description: "Report a problem with the platform itself (a broken tool, contradictory directive, broken workspace, " +
			"inconsistent memory or graph, auth failure) so its operators see it. Keep working afterwards if you can.",
		Args: []Arg{
			{Name: "category", Type: String, Description: "Kind of problem.", Required: true, Enum: IssueCategories, In: InBody},
			{Name: "severity", Type: String, Description: "warn if you could work around it.", Enum: IssueSeverities, Default: "error", In: InBody},
			{Name: "description", Type: String, Description: "What happened and what you expected.", Required: true, In: InBody},
			{Name: "offending_tool", Type: String, Description: "Tool that misbehaved, if any.", In: InBody},
			{Name: "resource_id", Type: String, Description: "Id of the object involved, if any.", In: InBody},
		},
		Handler: reportInternalIssue,
	}}
}

// reportInternalIssue logs the report at the severity's level and counts it. Validation is
// repeated here (the server validates too) so the handler is safe on its own.
func reportInternalIssue(ctx context.Context, deps Deps, args map[string]any) (string, error) {
	text := func(name string) (string, error) {
		v, ok := args[name]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", &ArgError{Arg: name, Reason: fmt.Sprintf("must be a string, got %T", v)}
		}
		return s, nil
	}
	var f struct{ category, severity, description, offendingTool, resourceID string }
	for _, p := range []struct {
		name string
		dst  *string
	}{{"category", &f.category}, {"severity", &f.severity}, {"description", &f.description},
		{"offending_tool", &f.offendingTool}, {"resource_id", &f.resourceID}} {
		s, err := text(p.name)
		if err != nil {
			return "", err
		}
		*p.dst = s
	}
	if !slices.Contains(IssueCategories, f.category) {
		return "", &ArgError{Arg: "category", Reason: fmt.Sprintf("must be one of %s, got %q", strings.Join(IssueCategories, ", "), f.category)}
	}
	if f.severity == "" {
		f.severity = internalissue.DefaultSeverity
	}
	if !slices.Contains(IssueSeverities, f.severity) {
		return "", &ArgError{Arg: "severity", Reason: fmt.Sprintf("must be one of %s, got %q", strings.Join(IssueSeverities, ", "), f.severity)}
	}
	if strings.TrimSpace(f.description) == "" {
		return "", &ArgError{Arg: "description", Reason: "must not be empty"}
	}
	level := slog.LevelError
	if f.severity == "warn" {
		level = slog.LevelWarn
	}
	if deps.Logger != nil {
		deps.Logger.Log(ctx, level, "internal issue reported",
			"category", f.category, "severity", f.severity, "description", f.description,
			"offending_tool", f.offendingTool, "resource_id", f.resourceID,
			"project", deps.Context[EnvProject], "task", deps.Context[EnvTask])
	}
	if deps.InternalIssues != nil {
		deps.InternalIssues(f.category, f.severity)
	}
	// Logged and counted first: recording it in the operator happens after this answer, in the
	// background, and can neither delay nor fail the call.
	if deps.RecordIssue != nil {
		deps.RecordIssue(internalissue.Report{Category: f.category, Severity: f.severity, Description: f.description,
			OffendingTool: f.offendingTool, ResourceID: f.resourceID})
	}
	return fmt.Sprintf("Reported %s issue (%s). The platform team will see it; continue your task if you can.", f.category, f.severity), nil
}
