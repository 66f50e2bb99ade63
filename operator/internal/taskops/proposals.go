package taskops

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// IssueProposal is an issue the caller proposes: Repo is a repo of its Project, or "".
type IssueProposal struct {
	Title, Body, Repo string
}

// ProposeIssue records a proposal in the caller's status.proposals and activity log (and as an
// Event). A repo the Project does not have is Invalid; past tatarav1.MaxProposals a Conflict; a
// retry with the same requestID records nothing again.
func (s *Service) ProposeIssue(ctx context.Context, caller *tatarav1.Task, p IssueProposal, requestID string) *Error {
	if err := s.checkRepo(ctx, caller, p.Repo); err != nil {
		return err
	}
	now := metav1.Now()
	replay := false
	t, err := s.updateStatus(ctx, caller, func(t *tatarav1.Task) (bool, *Error) {
		replay = requestID != "" && slices.ContainsFunc(t.Status.Proposals, func(q tatarav1.Proposal) bool { return q.RequestID == requestID })
		if replay {
			return false, nil
		}
		if len(t.Status.Proposals) >= tatarav1.MaxProposals {
			return false, errorf(Conflict, "the task already has the maximum of %d proposals", tatarav1.MaxProposals)
		}
		t.Status.Proposals = append(t.Status.Proposals, tatarav1.Proposal{Title: p.Title, Body: p.Body, Repo: p.Repo, CreatedAt: now, RequestID: requestID})
		t.Status.AddRequestActivity(now, tatarav1.ActivityProposal, p.Title, requestID)
		return true, nil
	})
	if err != nil {
		return err
	}
	if !replay {
		s.event(t, string(tatarav1.ActivityProposal), ActionProposeIssue, p.Title)
	}
	return nil
}

// ProposalView is a proposal as proposal_list answers it: the Task that made it, and the proposal.
type ProposalView struct {
	Task string `json:"task"`
	tatarav1.Proposal
}

// Proposals lists the proposals of every Task of the caller's Project, by Task name; never nil.
func (s *Service) Proposals(ctx context.Context, caller *tatarav1.Task) ([]ProposalView, *Error) {
	tasks, err := s.projectTasks(ctx, caller)
	if err != nil {
		return nil, err
	}
	out := []ProposalView{}
	for _, t := range tasks {
		for _, p := range t.Status.Proposals {
			out = append(out, ProposalView{Task: t.Name, Proposal: p})
		}
	}
	return out, nil
}
