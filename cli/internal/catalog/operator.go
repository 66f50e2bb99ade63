package catalog

import "net/http"

// Terminal intents: what an agent declares as the result of its Task. The operator records
// each once; change_summary does not end the Task, the others set its outcome.
const (
	IntentSkipResearch          = "skip_research"
	IntentChangeSummary         = "change_summary"
	IntentPROutcome             = "pr_outcome"
	IntentReviewVerdict         = "review_verdict"
	IntentIssueOutcome          = "issue_outcome"
	IntentDeclineImplementation = "decline_implementation"
	IntentAlreadyDone           = "already_done"
)

func taskRoute(suffix string) string    { return "/api/v1/tasks/{task}" + suffix }
func projectRoute(suffix string) string { return "/api/v1/projects/{project}" + suffix }

func intent(name, desc string, args ...Arg) Tool {
	return Tool{Name: name, Group: GroupOperator, Target: TargetOperator, Hints: Record,
		Method: http.MethodPost, Path: taskRoute("/intents/" + name), Description: desc,
		Args: append([]Arg{taskArg}, args...)}
}

// OperatorTools are the 20 tools served by this repository's operator REST API
// (TATARA_OPERATOR_URL, bearer TATARA_TOKEN). The operator authorizes each call server-side
// per Task kind.
func OperatorTools() []Tool {
	subtaskArg := pathArg("subtask", "Subtask name, from subtask_list.")
	return []Tool{
		{Name: "task_get", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: taskRoute(""),
			Description: "Your task: kind, repo, directive, phase, notes and recorded intents.",
			Args:        []Arg{taskArg}},
		{Name: "project_get", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: projectRoute(""),
			Description: "Your project's settings and conventions.",
			Args:        []Arg{projectArg}},
		{Name: "repo_list", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: projectRoute("/repos"),
			Description: "Repositories of the project, with default branch and URL.",
			Args:        []Arg{projectArg}},
		{Name: "task_list", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: projectRoute("/tasks"),
			Description: "Other tasks of the project, to avoid duplicate work.",
			Args: []Arg{projectArg, enumQuery("kind", "Only this task kind.", TaskKinds()...),
				enumQuery("phase", "Only this phase.", TaskPhases()...)}},
		{Name: "task_note", Group: GroupOperator, Target: TargetOperator, Hints: Create,
			Method: http.MethodPost, Path: taskRoute("/notes"),
			Description: "Add a progress note to your task's notes (seen by humans; the last 50 are kept).",
			Args:        []Arg{taskArg, body("text", "The note.")}},
		{Name: "subtask_create", Group: GroupOperator, Target: TargetOperator, Hints: Create,
			Method: http.MethodPost, Path: taskRoute("/subtasks"),
			Description: "Start a child task run by another agent, e.g. a review of your change.",
			Args: []Arg{taskArg,
				enumBody("kind", "Child task kind.", true, TaskKinds()...),
				body("repo", "Repository it works on."),
				body("directive", "Complete instructions for the child agent. A review is told the operator's directive instead (what the person's task asked for); yours is kept for humans."),
				optionalBody("ref", String, "Branch, tag or commit the child's clone starts from; default: the repo's default branch. A review of your own change always starts from the branch you push to; any other review must name the ref it reviews.")}},
		{Name: "subtask_list", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: taskRoute("/subtasks"),
			Description: "Your child tasks and their phases.",
			Args:        []Arg{taskArg}},
		{Name: "subtask_get", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: taskRoute("/subtasks/{subtask}"),
			Description: "One child task, with its outcome once done.",
			Args:        []Arg{taskArg, subtaskArg}},
		{Name: "subtask_cancel", Group: GroupOperator, Target: TargetOperator, Hints: Delete,
			Method: http.MethodPost, Path: taskRoute("/subtasks/{subtask}/cancel"),
			Description: "Stop a child task that is no longer needed.",
			Args:        []Arg{taskArg, subtaskArg, body("reason", "Why it is cancelled.")}},
		{Name: "comment", Group: GroupOperator, Target: TargetOperator, Hints: Publish,
			Method: http.MethodPost, Path: taskRoute("/comments"),
			Description: "Comment on your task's merge request.",
			Args:        []Arg{taskArg, body("body", "Markdown comment.")}},
		{Name: "comment_on_issue", Group: GroupOperator, Target: TargetOperator, Hints: Publish,
			Method: http.MethodPost, Path: taskRoute("/issue-comments"),
			Description: "Comment on an existing issue, e.g. to add evidence to a duplicate.",
			Args: []Arg{taskArg, {Name: "issue", Type: Integer, Description: "Issue number.", Required: true, In: InBody},
				body("body", "Markdown comment."), optionalBody("repo", String, "Repository; defaults to the task's.")}},
		{Name: "propose_issue", Group: GroupOperator, Target: TargetOperator, Hints: Publish,
			Method: http.MethodPost, Path: taskRoute("/proposals"),
			Description: "Propose a new issue for humans to accept. Check proposal_list for duplicates first.",
			Args: []Arg{taskArg, body("title", "Issue title."), body("body", "Markdown: problem, evidence, suggested fix."),
				optionalBody("repo", String, "Repository; defaults to the task's.")}},
		{Name: "proposal_list", Group: GroupOperator, Target: TargetOperator, Hints: Read,
			Method: http.MethodGet, Path: projectRoute("/proposals"),
			Description: "Issue proposals already made in the project.",
			Args:        []Arg{projectArg}},
		intent(IntentSkipResearch, "End a brainstorm with no proposal: nothing worth filing was found.",
			body("reason", "What you checked and why nothing is worth filing.")),
		intent(IntentChangeSummary, "Record what your change does, before pr_outcome. Does not end the task.",
			body("summary", "What changed and why, for the reviewer.")),
		intent(IntentPROutcome, "Final step of an implement task: report the merge request's result.",
			enumBody("outcome", "Result.", true, "opened", "merged", "closed", "failed"),
			optionalBody("url", String, "Merge request URL."), optionalBody("summary", String, "Details.")),
		intent(IntentReviewVerdict, "Final step of a review task: your verdict on the change.",
			enumBody("verdict", "Verdict.", true, "approve", "request_changes", "comment"),
			body("summary", "Reasons, with the findings that matter.")),
		intent(IntentIssueOutcome, "Final step of an issue task: how the issue was resolved.",
			enumBody("outcome", "Resolution.", true, "triaged", "fixed", "duplicate", "wont_fix", "needs_info", "invalid"),
			body("summary", "What you found and did.")),
		intent(IntentDeclineImplementation, "End an implement task without a change: it should not be done as asked.",
			body("reason", "Why, specifically.")),
		intent(IntentAlreadyDone, "End a task whose goal is already met in the code.",
			body("evidence", "Commit, file or MR that shows it.")),
	}
}

// TaskKinds are the operator's Task kinds (the CRD enum), for subtask_create and task_list.
func TaskKinds() []string {
	return []string{"implement", "review", "triageIssue", "brainstorm", "issueLifecycle", "incident", "selfImprove"}
}

// TaskPhases are the operator's Task phases (the CRD enum), for task_list.
func TaskPhases() []string {
	return []string{"Pending", "Running", "Succeeded", "Failed", "Cancelled"}
}
