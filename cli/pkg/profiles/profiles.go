// Package profiles exposes the cli's tool profiles to other components of the monorepo: the
// operator's authorization test proves its per-kind table agrees with what each profile
// advertises, without a second hand-written copy.
package profiles

import (
	"slices"

	"tatara.dev/cli/internal/catalog"
)

// ForKind returns the tool profile of a Task kind, as the operator sets TATARA_TOOL_PROFILE;
// "" for an unknown kind (the cli then fails open).
func ForKind(kind string) string { return catalog.ProfileForKind(kind) }

// Kinds returns the Task kinds the catalog maps to a profile, sorted.
func Kinds() []string { return catalog.Kinds() }

// IssueCategories and IssueSeverities are report_internal_issue's enums: the one source the
// wrapper's transcript reader clamps against.
func IssueCategories() []string { return slices.Clone(catalog.IssueCategories) }

// IssueSeverities: see IssueCategories.
func IssueSeverities() []string { return slices.Clone(catalog.IssueSeverities) }

// Names returns the known profile names, sorted.
func Names() []string { return catalog.ProfileNames() }

// Tools returns the tool names a known profile registers (alwaysOn included); ok is false for
// "" and unknown names, for which the cli fails open and registers every tool.
func Tools(profile string) (tools map[string]bool, ok bool) { return catalog.ProfileTools(profile) }

// OperatorTools returns the names of the operator-target tools, sorted.
func OperatorTools() []string {
	var names []string
	for _, t := range catalog.OperatorTools() {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// OperatorRoutes maps each operator-target tool to the "METHOD /path" pattern the cli calls, so
// the operator can prove its REST routes are exactly these (path parameters in braces).
func OperatorRoutes() map[string]string {
	routes := map[string]string{}
	for _, t := range catalog.OperatorTools() {
		routes[t.Name] = t.Method + " " + t.Path
	}
	return routes
}

// OperatorArgEnums maps each operator-target tool to its enumerated arguments and their allowed
// values, so the operator can prove it accepts exactly what the cli advertises to agents.
func OperatorArgEnums() map[string]map[string][]string {
	enums := map[string]map[string][]string{}
	for _, t := range catalog.OperatorTools() {
		for _, a := range t.Args {
			if len(a.Enum) == 0 {
				continue
			}
			if enums[t.Name] == nil {
				enums[t.Name] = map[string][]string{}
			}
			enums[t.Name][a.Name] = slices.Clone(a.Enum)
		}
	}
	return enums
}

// All returns the name of every tool in the catalog, sorted: what a fail-open cli registers.
func All() []string {
	var names []string
	for _, t := range catalog.All() {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}
