package rest

import (
	"slices"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// The operator tools: one REST route each. The names are the cli's tool names.
const (
	ToolTaskGet               = "task_get"
	ToolTaskList              = "task_list"
	ToolProjectGet            = "project_get"
	ToolRepoList              = "repo_list"
	ToolTaskNote              = "task_note"
	ToolSubtaskCreate         = "subtask_create"
	ToolSubtaskList           = "subtask_list"
	ToolSubtaskGet            = "subtask_get"
	ToolSubtaskCancel         = "subtask_cancel"
	ToolComment               = "comment"
	ToolCommentOnIssue        = "comment_on_issue"
	ToolProposeIssue          = "propose_issue"
	ToolProposalList          = "proposal_list"
	ToolSkipResearch          = "skip_research"
	ToolChangeSummary         = "change_summary"
	ToolPROutcome             = "pr_outcome"
	ToolReviewVerdict         = "review_verdict"
	ToolIssueOutcome          = "issue_outcome"
	ToolDeclineImplementation = "decline_implementation"
	ToolAlreadyDone           = "already_done"
)

// authorization is the server-side table of which operator tools a Task's token may call,
// per Task kind. It is written out in full on purpose (no unions computed from other rows):
// a reviewer reads one line per kind. TestAuthorizationAgreesWithProfiles proves it equals
// the cli's profiles for every kind.
var authorization = map[tatarav1.TaskKind][]string{
	tatarav1.KindImplement: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolSubtaskCreate, ToolSubtaskList, ToolSubtaskGet, ToolSubtaskCancel, ToolComment,
		ToolChangeSummary, ToolPROutcome, ToolDeclineImplementation, ToolAlreadyDone,
	},
	tatarav1.KindReview: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolComment, ToolReviewVerdict,
	},
	tatarav1.KindTriageIssue: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolComment, ToolCommentOnIssue, ToolIssueOutcome, ToolTaskList,
	},
	tatarav1.KindBrainstorm: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolCommentOnIssue, ToolProposeIssue, ToolSkipResearch, ToolTaskList, ToolProposalList,
	},
	tatarav1.KindIssueLifecycle: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolSubtaskCreate, ToolSubtaskList, ToolSubtaskGet, ToolSubtaskCancel, ToolComment,
		ToolChangeSummary, ToolPROutcome, ToolDeclineImplementation, ToolAlreadyDone,
		ToolReviewVerdict, ToolCommentOnIssue, ToolIssueOutcome, ToolTaskList,
	},
	tatarav1.KindIncident: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolComment, ToolCommentOnIssue, ToolProposeIssue, ToolTaskList, ToolIssueOutcome,
	},
	tatarav1.KindSelfImprove: {
		ToolTaskGet, ToolProjectGet, ToolRepoList,
		ToolTaskNote, ToolProposeIssue, ToolProposalList,
		ToolChangeSummary, ToolPROutcome, ToolDeclineImplementation, ToolAlreadyDone,
	},
}

// Allowed reports whether a Task of that kind may call the operator tool. A kind outside
// the table (impossible through the CRD enum) may call nothing: the server fails closed
// where the cli fails open.
func Allowed(kind tatarav1.TaskKind, tool string) bool {
	if tool == ToolReportInternalIssue {
		_, known := authorization[kind] // every kind reports: the tool is in every profile
		return known
	}
	return slices.Contains(authorization[kind], tool)
}

// AllowedTools returns the sorted operator tools a Task of that kind may call.
func AllowedTools(kind tatarav1.TaskKind) []string {
	out := slices.Clone(authorization[kind])
	slices.Sort(out)
	return out
}
