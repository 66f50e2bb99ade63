package rest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/profiles"
	"tatara.dev/cli/pkg/redact"
	"tatara.dev/cli/pkg/tasktoken"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
)

// TokenReviewPath is where a backend (memory, chat) asks who a token belongs to. The cli sends
// each backend a token derived for it alone (tasktoken.ForAudience); the backend must review it
// here with its audience and honour the answer: serve only an active token, and only for its
// project and task.
const TokenReviewPath = "/api/v1/tokenreviews"

// ToolTokenReview labels the endpoint in the request counter (it is not an agent tool).
const ToolTokenReview = "token_review"

// TokenReviewRequest is the body of POST /api/v1/tokenreviews.
type TokenReviewRequest struct {
	Token string `json:"token"`
	// Audience is the reviewing backend, one of tasktoken.Audiences: Token is then the token the
	// cli derived for that audience, and a token derived for another audience, or the Task token
	// itself, is inactive. Empty reviews a Task token (what clis before audience tokens sent).
	Audience string `json:"audience,omitempty"`
}

// TokenReview is the answer: Active false (with Reason) for any token the operator would refuse,
// else who it belongs to and what it may do.
type TokenReview struct {
	Active    bool   `json:"active"`
	Reason    string `json:"reason,omitempty"`
	Audience  string `json:"audience,omitempty"`
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
	if req.Audience != "" && !slices.Contains(tasktoken.Audiences, req.Audience) {
		s.count(ToolTokenReview, http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("invalid token review: unknown audience %q (want one of %s, or none for a Task token)",
			redact.Truncate(req.Audience), strings.Join(tasktoken.Audiences, ", "))})
		return
	}
	tok := req.Token
	if req.Audience != "" {
		taskToken, err := s.taskTokenOf(r.Context(), req.Audience, req.Token)
		if err != nil {
			s.count(ToolTokenReview, http.StatusInternalServerError)
			writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
			return
		}
		if taskToken == "" {
			s.count(ToolTokenReview, http.StatusOK)
			writeJSON(w, http.StatusOK, TokenReview{Active: false, Reason: "invalid token", Audience: req.Audience})
			return
		}
		tok = taskToken
	}
	task, aerr := s.taskOfToken(r.Context(), tok, sourceAddr(r))
	switch {
	case aerr != nil && aerr.status == http.StatusUnauthorized:
		s.count(ToolTokenReview, http.StatusOK)
		writeJSON(w, http.StatusOK, TokenReview{Active: false, Reason: aerr.msg, Audience: req.Audience})
		return
	case aerr != nil:
		s.count(ToolTokenReview, aerr.status)
		writeJSON(w, aerr.status, errorBody{Error: aerr.msg})
		return
	}
	review := reviewOf(task)
	review.Audience = req.Audience
	s.count(ToolTokenReview, http.StatusOK)
	writeJSON(w, http.StatusOK, review)
}

// taskTokenOf is the Task token an audience token was derived from, "" when it was derived from
// none the operator minted (or for another audience).
func (s *Server) taskTokenOf(ctx context.Context, audience, audienceToken string) (string, error) {
	if !tasktoken.Valid(audienceToken) {
		return "", nil
	}
	var secrets corev1.SecretList
	if err := s.opts.Client.List(ctx, &secrets, client.MatchingFields{index.SecretAudienceToken: index.AudienceTokenKey(audience, audienceToken)}); err != nil {
		return "", fmt.Errorf("failed to look up token: %w", err)
	}
	if len(secrets.Items) != 1 {
		return "", nil
	}
	taskToken := string(secrets.Items[0].Data[agent.TokenKey])
	if subtle.ConstantTimeCompare([]byte(tasktoken.ForAudience(taskToken, audience)), []byte(audienceToken)) != 1 {
		return "", nil
	}
	return taskToken, nil
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
