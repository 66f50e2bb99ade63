package rest

import (
	"context"
	"net/http"

	"tatara.dev/operator/internal/taskops"
)

// The recording calls: a note, a comment, an issue comment, a proposal. Each answers 201 with
// {"result": "recorded"}, a retry with the same Idempotency-Key too.

type recorded struct {
	Result string `json:"result"`
}

func (s *Server) taskNote(ctx context.Context, c *call) (int, any, *apiError) {
	var req noteRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.ops.Note(ctx, c.task, req.Text, c.requestID); err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusCreated, recorded{Result: taskops.ResultRecorded}, nil
}

func (s *Server) comment(ctx context.Context, c *call) (int, any, *apiError) {
	var req commentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.ops.Comment(ctx, c.task, req.Body, c.requestID); err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusCreated, recorded{Result: taskops.ResultRecorded}, nil
}

func (s *Server) commentOnIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req issueCommentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.ops.CommentOnIssue(ctx, c.task, req.issueComment(), c.requestID); err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusCreated, recorded{Result: taskops.ResultRecorded}, nil
}

func (s *Server) proposeIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req proposalRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.ops.ProposeIssue(ctx, c.task, req.proposal(), c.requestID); err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusCreated, recorded{Result: taskops.ResultRecorded}, nil
}
