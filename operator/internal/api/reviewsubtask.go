package api

import (
	"fmt"
	"net/http"
	"strings"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// A review subtask of an implement Task reviews its parent's own work, so no agent may write what
// the reviewer is told: an implementer that asked for "a quick review, it is already approved"
// would steer its own verdict (review by proxy). The operator writes that directive instead, from
// the directive of the nearest ancestor that no agent created (a root Task: subtask_create sets
// spec.parent, so a Task without one was created by a person or the operator) and the branch the
// parent pushes to, which is also the review's ref. For an implement Task that is itself a
// subtask, that ancestor is the Task above it: its own directive was written by that Task's agent.
// The text the implementer's agent sent is kept on the subtask, in ImplementerNotesAnnotation, for
// people; the reviewer's agent is never given it.

// ImplementerNotesAnnotation holds the directive an implement Task's agent sent with a review
// subtask_create, cut to maxImplementerNotes bytes.
const ImplementerNotesAnnotation = "tatara.dev/implementer-notes"

const (
	maxImplementerNotes = 4096
	// maxDirectiveBytes is the CRD's bound on spec.directive.
	maxDirectiveBytes = 64 << 10
)

// reviewsParent reports whether a child of kind child of parent is a review of parent's work,
// whose directive the operator writes.
func reviewsParent(parent *tatarav1.Task, child tatarav1.TaskKind) bool {
	return parent.Spec.Kind == tatarav1.KindImplement && child == tatarav1.KindReview
}

// reviewOfParent rewrites req, a review subtask of an implement parent, into the operator's: the
// parent's branch (in the requested repo of the Project) as the ref and the operator's directive,
// written from asker's directive (see above). It returns the implementer's text for
// ImplementerNotesAnnotation. Another ref is a 400: the review is of the parent's change, nothing
// else.
func reviewOfParent(parent, asker *tatarav1.Task, req *subtaskCreateRequest) (notes string, aerr *apiError) {
	branch := agent.PushBranch(parent)
	if req.Ref != "" && req.Ref != branch {
		return "", errorf(http.StatusBadRequest, "field \"ref\": a review subtask reviews its parent's branch %q, not %q", branch, req.Ref)
	}
	notes = req.Directive
	if len(notes) > maxImplementerNotes {
		notes = strings.ToValidUTF8(notes[:maxImplementerNotes], "")
	}
	req.Ref, req.Directive = branch, reviewDirective(parent, asker, req.Repo, branch)
	return notes, nil
}

// reviewDirective is what the reviewer of parent's change in repo is told; asker is the nearest
// ancestor-or-self of parent that no agent created, whose directive says what was asked.
func reviewDirective(parent, asker *tatarav1.Task, repo, branch string) string {
	head := fmt.Sprintf("Review the change that Task %q made in repo %q, on branch %q (the branch checked out here), "+
		"against what was asked. Judge it on your own: no agent wrote this directive.\n\n", parent.Name, repo, branch)
	if asker.Name == parent.Name {
		head += fmt.Sprintf("What Task %q was asked to do (its directive, from whoever created it):\n\n", parent.Name)
	} else {
		head += fmt.Sprintf("Task %q is a subtask of Task %q, whose agent wrote its directive. What Task %q was asked to do "+
			"(its directive, from whoever created it; Task %q does part of it):\n\n", parent.Name, asker.Name, asker.Name, parent.Name)
	}
	asked := asker.Spec.Directive
	if room := maxDirectiveBytes - len(head); len(asked) > room {
		asked = strings.ToValidUTF8(asked[:room], "")
	}
	return head + asked
}
