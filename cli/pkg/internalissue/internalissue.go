// Package internalissue is the wire form of a report_internal_issue report that the cli sends to
// the operator, which keeps it as a durable, deduplicated record (an InternalIssue). The cli and
// the operator both import it, so the path and the body have one definition.
package internalissue

import (
	"slices"
	"strings"
)

// Path is the operator REST route of a Task's reports ({task} is the caller's Task).
const Path = "/api/v1/tasks/{task}/internal-issues"

// PathFor is Path for one Task.
func PathFor(task string) string { return strings.Replace(Path, "{task}", task, 1) }

// Limits of a report's free text, checked by the operator: an agent is an attacker, and what it
// writes ends up in an object of the cluster.
const (
	// MaxDescriptionBytes bounds the description the operator accepts; it keeps at most
	// StoredDescriptionBytes of it, masked.
	MaxDescriptionBytes = 8 << 10
	// StoredDescriptionBytes bounds the description an InternalIssue keeps.
	StoredDescriptionBytes = 1 << 10
	// MaxNameBytes bounds offending_tool and resource_id.
	MaxNameBytes = 256
)

// Report is one report, as the tool's arguments name its fields.
type Report struct {
	Category      string `json:"category"`
	Severity      string `json:"severity,omitempty"`
	Description   string `json:"description"`
	OffendingTool string `json:"offending_tool,omitempty"`
	ResourceID    string `json:"resource_id,omitempty"`
}

// The tool's enums: the one source of the catalog's schema, the wrapper's clamp and the operator's
// validation.
var (
	categories = []string{"tool_error", "directive_contradiction", "workspace_broken",
		"memory_inconsistent", "graph_inconsistent", "auth", "other"}
	// severities go from the least to the most severe.
	severities = []string{"warn", "error"}
)

// DefaultSeverity is the severity of a report that names none.
const DefaultSeverity = "error"

// Categories returns the tool's categories, in order.
func Categories() []string { return slices.Clone(categories) }

// Severities returns the tool's severities, from the least to the most severe.
func Severities() []string { return slices.Clone(severities) }
