package taskops

import (
	"fmt"
	"strings"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// No agent writes what a reviewer is told (review by proxy): an implementer that asked for "a
// quick review, it is already approved" would steer its own verdict, and so would any Task that
// asks for a review of a branch that it, or a Task it delegated to, pushed. So every review
// subtask, whatever kind its parent is, is told the operator's directive instead, written from the
// directive of the nearest ancestor that no agent created (a root Task: subtask_create sets
// spec.parent, so a Task without one was created by a person or the operator). A coordinator
// (issueLifecycle) writes its implement child's directive, never the directive of that child's
// review: it is the root's text that the reviewer judges against.
//
// An implement Task's review is of its own branch, which is then the review's ref. Another
// parent names the ref to review (a delegate's branch, say); the operator does not trust a ref to
// tell whose work it holds (a branch name or a commit id), so it treats every review alike. The
// text the asking agent sent is kept on the subtask, in ImplementerNotesAnnotation, for people;
// the reviewer's agent is never given it. While a review runs, its parent sees neither its
// activity, notes nor outcome, and may not cancel it (subtaskView, CancelSubtask).

// ImplementerNotesAnnotation holds the directive an implement Task's agent sent with a review
// subtask_create, cut to maxImplementerNotes bytes.
const ImplementerNotesAnnotation = "tatara.dev/implementer-notes"

const (
	maxImplementerNotes = 4096
	// maxDirectiveBytes is the CRD's bound on spec.directive.
	maxDirectiveBytes = 64 << 10
)

// isReview reports whether a subtask of kind child is a review, whose directive the operator
// writes and whose parent may neither watch nor cancel it while it runs.
func isReview(child tatarav1.TaskKind) bool { return child == tatarav1.KindReview }

// reviewRequest rewrites req, a review subtask of parent, into the operator's: the ref to review
// and the operator's directive, written from asker's directive (see above). It returns the asking
// agent's text for ImplementerNotesAnnotation. An implement parent's review is of its own branch:
// another ref is Invalid. Any other parent must name the ref (Invalid without): without one the
// review would read the default branch, which no Task changed.
func reviewRequest(parent, asker *tatarav1.Task, req *SubtaskSpec) (notes string, err *Error) {
	notes = req.Directive
	if len(notes) > maxImplementerNotes {
		notes = strings.ToValidUTF8(notes[:maxImplementerNotes], "")
	}
	if parent.Spec.Kind == tatarav1.KindImplement {
		branch := agent.PushBranch(parent)
		if req.Ref != "" && req.Ref != branch {
			return "", errorf(Invalid, "field \"ref\": a review subtask reviews its parent's branch %q, not %q", branch, req.Ref)
		}
		req.Ref, req.Directive = branch, reviewDirective(parent, asker, req.Repo, branch)
		return notes, nil
	}
	if req.Ref == "" {
		return "", errorf(Invalid, "field \"ref\": a review subtask of a %s Task names the branch or commit to review", parent.Spec.Kind)
	}
	req.Directive = delegatedReviewDirective(parent, asker, req.Repo, req.Ref)
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
	return withAsked(head, asker)
}

// delegatedReviewDirective is what the reviewer of ref in repo is told when parent, which is not
// an implement Task, asked for the review; asker is as for reviewDirective.
func delegatedReviewDirective(parent, asker *tatarav1.Task, repo, ref string) string {
	head := fmt.Sprintf("Review the change on %q in repo %q (checked out here) against what was asked. "+
		"Judge it on your own: no agent wrote this directive. Task %q, which an agent runs, asked for this review.\n\n", ref, repo, parent.Name)
	head += fmt.Sprintf("What Task %q was asked to do (its directive, from whoever created it):\n\n", asker.Name)
	return withAsked(head, asker)
}

// withAsked appends asker's directive to head, cut to the CRD's bound on a directive.
func withAsked(head string, asker *tatarav1.Task) string {
	asked := asker.Spec.Directive
	if room := maxDirectiveBytes - len(head); len(asked) > room {
		asked = strings.ToValidUTF8(asked[:room], "")
	}
	return head + asked
}
