package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/taskops"
)

// The request bodies, each with its validation (a 400 naming the first missing or bad field) and
// the plain input of taskops it becomes.

type noteRequest struct {
	Text string `json:"text"`
}

func (r *noteRequest) validate() *apiError { return required("text", r.Text) }

type subtaskCreateRequest struct {
	Kind      string `json:"kind"`
	Repo      string `json:"repo"`
	Directive string `json:"directive"`
	// Ref is the child's spec.ref; the CRD validates it (a 400 names the field).
	Ref string `json:"ref,omitempty"`
}

func (r *subtaskCreateRequest) validate() *apiError {
	kinds := make([]string, 0, len(tatarav1.TaskKinds))
	for _, k := range tatarav1.TaskKinds {
		kinds = append(kinds, string(k))
	}
	return firstErr(oneOf("kind", r.Kind, kinds...), required("repo", r.Repo), required("directive", r.Directive))
}

func (r *subtaskCreateRequest) spec() taskops.SubtaskSpec {
	return taskops.SubtaskSpec{Kind: tatarav1.TaskKind(r.Kind), Repo: r.Repo, Directive: r.Directive, Ref: r.Ref}
}

type subtaskCancelRequest struct {
	Reason string `json:"reason"`
}

func (r *subtaskCancelRequest) validate() *apiError { return nil }

type commentRequest struct {
	Body string `json:"body"`
}

func (r *commentRequest) validate() *apiError { return required("body", r.Body) }

type issueCommentRequest struct {
	Issue *int   `json:"issue"`
	Body  string `json:"body"`
	Repo  string `json:"repo,omitempty"`
}

func (r *issueCommentRequest) validate() *apiError {
	if r.Issue == nil {
		return errorf(http.StatusBadRequest, "field %q is required and must be a positive integer", "issue")
	}
	if *r.Issue <= 0 {
		return errorf(http.StatusBadRequest, "field %q must be a positive integer, got %d", "issue", *r.Issue)
	}
	return required("body", r.Body)
}

// issueComment is the validated request (Issue is set).
func (r *issueCommentRequest) issueComment() taskops.IssueComment {
	return taskops.IssueComment{Repo: r.Repo, Issue: *r.Issue, Body: r.Body}
}

type proposalRequest struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Repo  string `json:"repo,omitempty"`
}

func (r *proposalRequest) validate() *apiError {
	return firstErr(required("title", r.Title), required("body", r.Body))
}

func (r *proposalRequest) proposal() taskops.IssueProposal {
	return taskops.IssueProposal{Title: r.Title, Body: r.Body, Repo: r.Repo}
}

// intentRequest is the body of one intent tool; value is its enum field (empty when none).
type intentRequest interface {
	validator
	value() string
	summary() string
}

type skipResearchRequest struct {
	Reason string `json:"reason"`
}

func (r *skipResearchRequest) validate() *apiError { return required("reason", r.Reason) }
func (r *skipResearchRequest) value() string       { return "" }
func (r *skipResearchRequest) summary() string     { return r.Reason }

type changeSummaryRequest struct {
	Summary string `json:"summary"`
}

func (r *changeSummaryRequest) validate() *apiError { return required("summary", r.Summary) }
func (r *changeSummaryRequest) value() string       { return "" }
func (r *changeSummaryRequest) summary() string     { return r.Summary }

type prOutcomeRequest struct {
	Outcome string `json:"outcome"`
	URL     string `json:"url,omitempty"`
	Summary string `json:"summary,omitempty"`
}

func (r *prOutcomeRequest) validate() *apiError {
	return oneOf("outcome", r.Outcome, "opened", "merged", "closed", "failed")
}
func (r *prOutcomeRequest) value() string   { return r.Outcome }
func (r *prOutcomeRequest) summary() string { return strings.TrimSpace(r.URL + " " + r.Summary) }

type reviewVerdictRequest struct {
	Verdict string `json:"verdict"`
	Summary string `json:"summary"`
}

func (r *reviewVerdictRequest) validate() *apiError {
	return firstErr(oneOf("verdict", r.Verdict, "approve", "request_changes", "comment"), required("summary", r.Summary))
}
func (r *reviewVerdictRequest) value() string   { return r.Verdict }
func (r *reviewVerdictRequest) summary() string { return r.Summary }

type issueOutcomeRequest struct {
	Outcome string `json:"outcome"`
	Summary string `json:"summary"`
}

func (r *issueOutcomeRequest) validate() *apiError {
	return firstErr(oneOf("outcome", r.Outcome, "triaged", "fixed", "duplicate", "wont_fix", "needs_info", "invalid"),
		required("summary", r.Summary))
}
func (r *issueOutcomeRequest) value() string   { return r.Outcome }
func (r *issueOutcomeRequest) summary() string { return r.Summary }

type declineRequest struct {
	Reason string `json:"reason"`
}

func (r *declineRequest) validate() *apiError { return required("reason", r.Reason) }
func (r *declineRequest) value() string       { return "" }
func (r *declineRequest) summary() string     { return r.Reason }

type alreadyDoneRequest struct {
	Evidence string `json:"evidence"`
}

func (r *alreadyDoneRequest) validate() *apiError { return required("evidence", r.Evidence) }
func (r *alreadyDoneRequest) value() string       { return "" }
func (r *alreadyDoneRequest) summary() string     { return r.Evidence }

// newIntentRequest returns an empty body for an intent tool, or nil for a non-intent.
func newIntentRequest(tool string) intentRequest {
	switch tool {
	case ToolSkipResearch:
		return &skipResearchRequest{}
	case ToolChangeSummary:
		return &changeSummaryRequest{}
	case ToolPROutcome:
		return &prOutcomeRequest{}
	case ToolReviewVerdict:
		return &reviewVerdictRequest{}
	case ToolIssueOutcome:
		return &issueOutcomeRequest{}
	case ToolDeclineImplementation:
		return &declineRequest{}
	case ToolAlreadyDone:
		return &alreadyDoneRequest{}
	default:
		return nil
	}
}

// intentOf is the intent a decoded, validated body of tool records.
func intentOf(tool string, req intentRequest) (taskops.Intent, error) {
	body, err := canonical(req)
	if err != nil {
		return taskops.Intent{}, err
	}
	return taskops.Intent{Tool: tool, Value: req.value(), Summary: req.summary(), Body: body}, nil
}

// canonical re-encodes a decoded body, so whitespace and key order do not defeat idempotence.
func canonical(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("failed to marshal intent body %T: %w", v, err)
	}
	return string(b), nil
}
