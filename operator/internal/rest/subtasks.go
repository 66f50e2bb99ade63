package rest

import (
	"context"
	"net/http"
)

// The subtask tools: create, list, get and cancel the caller's child Tasks. What each decides
// (the policy, the limits, the lock, a review's directive, who may see and cancel what) is
// taskops'.

func (s *Server) subtaskCreate(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCreateRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	sub, err := s.ops.CreateSubtask(ctx, c.task, req.spec(), c.requestID)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusCreated, sub, nil
}

func (s *Server) subtaskList(ctx context.Context, c *call) (int, any, *apiError) {
	subs, err := s.ops.Subtasks(ctx, c.task)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusOK, map[string]any{"subtasks": subs}, nil
}

func (s *Server) subtaskGet(ctx context.Context, c *call) (int, any, *apiError) {
	sub, err := s.ops.Subtask(ctx, c.task, c.r.PathValue("subtask"))
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusOK, sub, nil
}

func (s *Server) subtaskCancel(ctx context.Context, c *call) (int, any, *apiError) {
	var req subtaskCancelRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	result, err := s.ops.CancelSubtask(ctx, c.task, c.r.PathValue("subtask"), req.Reason)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusOK, recorded{Result: result}, nil
}
