package taskops

import (
	"context"
	"fmt"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Comment records a comment of the caller in its activity log (and as an Event); a retry of the
// call with the same requestID records nothing again.
func (s *Service) Comment(ctx context.Context, caller *tatarav1.Task, body, requestID string) *Error {
	return s.addActivity(ctx, caller, tatarav1.ActivityComment, ActionComment, body, requestID)
}

// IssueComment is a comment on an issue: Repo is a repo of the caller's Project ("" for the
// caller's own repo), Issue its issue number.
type IssueComment struct {
	Repo  string
	Issue int
	Body  string
}

// CommentOnIssue records a comment of the caller on an issue in its activity log (and as an
// Event). A repo the Project does not have is Invalid.
func (s *Service) CommentOnIssue(ctx context.Context, caller *tatarav1.Task, c IssueComment, requestID string) *Error {
	if err := s.checkRepo(ctx, caller, c.Repo); err != nil {
		return err
	}
	repo := c.Repo
	if repo == "" {
		repo = caller.Spec.Repo
	}
	text := fmt.Sprintf("issue %s#%d: %s", repo, c.Issue, c.Body)
	return s.addActivity(ctx, caller, tatarav1.ActivityIssueComment, ActionCommentOnIssue, text, requestID)
}
