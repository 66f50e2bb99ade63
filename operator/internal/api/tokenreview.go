package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// TokenReviewPath is where a backend (memory, chat) asks who a Task token belongs to. The cli
// sends the Task token as a bearer to every backend; a backend must review it here and honour
// the answer: serve only an active token, and only for its project and task.
const TokenReviewPath = "/api/v1/tokenreviews"

// ToolTokenReview labels the endpoint in the request counter (it is not an agent tool).
const ToolTokenReview = "token_review"

// TokenReviewRequest is the body of POST /api/v1/tokenreviews.
type TokenReviewRequest struct {
	Token string `json:"token"`
}

// TokenReview is the answer: Active false (with Reason) for any token the operator would refuse,
// else who it belongs to and what it may do.
type TokenReview struct {
	Active    bool   `json:"active"`
	Reason    string `json:"reason,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Project   string `json:"project,omitempty"`
	Task      string `json:"task,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Profile is the cli tool profile of the Task's kind; Tools are its tools (sorted), the ones
	// the agent is offered, memory and chat tools included.
	Profile string   `json:"profile,omitempty"`
	Tools   []string `json:"tools,omitempty"`
	// OperatorTools are the operator tools the token may call (the authorization table).
	OperatorTools []string `json:"operatorTools,omitempty"`
}

// tokenReview answers POST /api/v1/tokenreviews. It needs no credential of its own: the token
// under review is the secret, and the answer only describes that token's own Task.
func (s *Server) tokenReview(w http.ResponseWriter, r *http.Request) {
	var req TokenReviewRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, s.opts.MaxBodyBytes)).Decode(&req); err != nil || req.Token == "" {
		s.count(ToolTokenReview, http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf(`invalid token review: want {"token":"<TATARA_TOKEN>"} (at most %d bytes)`, s.opts.MaxBodyBytes)})
		return
	}
	task, aerr := s.taskOfToken(r.Context(), req.Token, sourceAddr(r))
	switch {
	case aerr != nil && aerr.status == http.StatusUnauthorized:
		s.count(ToolTokenReview, http.StatusOK)
		writeJSON(w, http.StatusOK, TokenReview{Active: false, Reason: aerr.msg})
		return
	case aerr != nil:
		s.count(ToolTokenReview, aerr.status)
		writeJSON(w, aerr.status, errorBody{Error: aerr.msg})
		return
	}
	s.count(ToolTokenReview, http.StatusOK)
	writeJSON(w, http.StatusOK, reviewOf(task))
}

func reviewOf(task *tatarav1.Task) TokenReview {
	profile := agent.ToolProfileForKind(task.Spec.Kind)
	set, _ := profiles.Tools(profile)
	tools := make([]string, 0, len(set))
	for name := range set {
		tools = append(tools, name)
	}
	slices.Sort(tools)
	return TokenReview{
		Active: true, Namespace: task.Namespace, Project: task.Spec.ProjectRef.Name, Task: task.Name,
		Kind: string(task.Spec.Kind), Profile: profile, Tools: tools, OperatorTools: AllowedTools(task.Spec.Kind),
	}
}
