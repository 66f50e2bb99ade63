// Profiles: which tools each Task kind's agent gets. This file owns it: the profile names, the
// Task kind -> profile table, and each profile's tool groups plus its own operator tools. The
// groups and the tool entries are in catalog.go and one file per backend; the server registers
// only a profile's tools (cli/internal/mcpserver/server.go); the operator and e2e read the same
// tables through cli/pkg/profiles, and the operator authorizes each REST route per Task kind
// (operator/internal/rest/authz.go).

package catalog

import (
	"maps"
	"slices"
)

// Profile names (docs/architecture.md, "Profiles"). The operator sets one per Task kind in
// TATARA_TOOL_PROFILE; "" or an unknown name fails open to the whole catalog.
const (
	ProfileImplement   = "implement"
	ProfileReview      = "review"
	ProfileTriage      = "triage"
	ProfileBrainstorm  = "brainstorm"
	ProfileLifecycle   = "lifecycle"
	ProfileIncident    = "incident"
	ProfileSelfImprove = "selfImprove"
)

// kindProfiles maps each Task kind (the operator's CRD enum) to its profile. Kinds are plain
// strings here so the catalog stays free of the operator's API; the operator proves its enum and
// this table agree (operator/internal/agent TestTaskKindsAreTheCatalogKinds).
var kindProfiles = map[string]string{
	"implement":      ProfileImplement,
	"review":         ProfileReview,
	"triageIssue":    ProfileTriage,
	"brainstorm":     ProfileBrainstorm, // healthCheck Tasks are kind brainstorm
	"issueLifecycle": ProfileLifecycle,
	"incident":       ProfileIncident,
	"selfImprove":    ProfileSelfImprove,
}

// ProfileForKind returns the profile of a Task kind; "" for an unknown kind, for which the cli
// fails open.
func ProfileForKind(kind string) string { return kindProfiles[kind] }

// Kinds returns the Task kinds that have a profile, sorted.
func Kinds() []string { return slices.Sorted(maps.Keys(kindProfiles)) }

// alwaysOn is unioned into every profile so that no profile author can forget them.
var alwaysOn = []string{ReportInternalIssue, "project_get", "repo_list", "task_get"}

// profile is a set of whole groups plus individually named operator tools.
type profile struct {
	groups   []Group
	operator []string
}

var (
	implementOps = []string{"task_note", "subtask_create", "subtask_list", "subtask_get", "subtask_cancel",
		"comment", IntentChangeSummary, IntentPROutcome, IntentDeclineImplementation, IntentAlreadyDone}
	reviewOps = []string{"task_note", "comment", IntentReviewVerdict}
	triageOps = []string{"task_note", "comment", "comment_on_issue", IntentIssueOutcome, "task_list"}

	research = []Group{GroupMemory, GroupCodeGraph}
	withChat = []Group{GroupMemory, GroupCodeGraph, GroupChat}
)

var profiles = map[string]profile{
	ProfileImplement: {groups: research, operator: implementOps},
	ProfileReview:    {groups: research, operator: reviewOps},
	ProfileTriage:    {groups: research, operator: triageOps},
	ProfileBrainstorm: {groups: withChat, operator: []string{"task_note", "comment_on_issue", "propose_issue",
		IntentSkipResearch, "task_list", "proposal_list"}},
	// lifecycle spans triage -> implement -> review in one long-lived pod, so it gets the union.
	ProfileLifecycle: {groups: withChat, operator: union(implementOps, reviewOps, triageOps)},
	ProfileIncident: {groups: withChat, operator: []string{"task_note", "comment", "comment_on_issue",
		"propose_issue", "task_list", IntentIssueOutcome}},
	ProfileSelfImprove: {groups: research, operator: []string{"task_note", "propose_issue", "proposal_list",
		IntentChangeSummary, IntentPROutcome, IntentDeclineImplementation, IntentAlreadyDone}},
}

func union(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// ProfileNames returns the known profiles, sorted.
func ProfileNames() []string {
	return slices.Sorted(maps.Keys(profiles))
}

// ProfileTools returns the tool set of a known profile (alwaysOn included), or ok=false for
// "" and unknown names: the caller then fails open and registers everything.
func ProfileTools(name string) (tools map[string]bool, ok bool) {
	p, ok := profiles[name]
	if !ok {
		return nil, false
	}
	tools = make(map[string]bool)
	for _, t := range All() {
		if slices.Contains(p.groups, t.Group) {
			tools[t.Name] = true
		}
	}
	for _, n := range append(slices.Clone(alwaysOn), p.operator...) {
		tools[n] = true
	}
	return tools, true
}

// AlwaysOn returns the tools every profile includes.
func AlwaysOn() []string { return slices.Clone(alwaysOn) }
