package rest

import (
	"context"
	"net/http"
	"slices"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/taskops"
)

// The reads: the caller's Task, its Project's Tasks, repos and proposals.

func (s *Server) taskGet(_ context.Context, c *call) (int, any, *apiError) {
	return http.StatusOK, taskops.ViewOf(c.task), nil
}

func (s *Server) taskList(ctx context.Context, c *call) (int, any, *apiError) {
	q := c.r.URL.Query()
	kind, phase := tatarav1.TaskKind(q.Get("kind")), tatarav1.TaskPhase(q.Get("phase"))
	if kind != "" && !kind.Valid() {
		return 0, nil, errorf(http.StatusBadRequest, "query parameter \"kind\" is %q: want one of %v", kind, tatarav1.TaskKinds)
	}
	if phase != "" && !slices.Contains(tatarav1.TaskPhases, phase) {
		return 0, nil, errorf(http.StatusBadRequest, "query parameter \"phase\" is %q: want one of %v", phase, tatarav1.TaskPhases)
	}
	tasks, err := s.ops.Tasks(ctx, c.task, kind, phase)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusOK, map[string]any{"tasks": tasks}, nil
}

func (s *Server) projectGet(ctx context.Context, c *call) (int, any, *apiError) {
	return s.projectRepos(ctx, c, true)
}

func (s *Server) repoList(ctx context.Context, c *call) (int, any, *apiError) {
	return s.projectRepos(ctx, c, false)
}

// projectRepos answers the caller's Project's repos (never null), with its name when withName.
func (s *Server) projectRepos(ctx context.Context, c *call, withName bool) (int, any, *apiError) {
	name, repos, err := s.ops.Repos(ctx, c.task)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	if withName {
		return http.StatusOK, map[string]any{"name": name, "repos": repos}, nil
	}
	return http.StatusOK, map[string]any{"repos": repos}, nil
}

func (s *Server) proposalList(ctx context.Context, c *call) (int, any, *apiError) {
	proposals, err := s.ops.Proposals(ctx, c.task)
	if err != nil {
		return 0, nil, fromOps(err)
	}
	return http.StatusOK, map[string]any{"proposals": proposals}, nil
}
