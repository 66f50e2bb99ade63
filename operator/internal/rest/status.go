package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Status writes: every recorded call re-reads the Task, changes its status through the API
// server (retrying on conflicts) and mirrors the change as an Event.

// conflictBackoff spreads the re-read-and-write attempts of status writes and subtask cancels
// over about 1.5 s (10 tries, well inside the handler timeout): during an operator rollout two
// replicas' controllers and the agent's own calls write the same Task, and the client-go default
// (5 tries within ~50 ms) ran out there and failed agents' task_note calls. No Cap: reaching a Backoff's Cap ends its steps.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

type recorded struct {
	Result string `json:"result"`
}

// updateStatus re-reads the caller's Task from the API server, applies mutate and writes the
// status, retrying on conflicts. mutate returns false when nothing changed (no write). A Task that
// ended, or whose token changed, since authenticate read it from the cache is a 401 and no write.
func (s *Server) updateStatus(ctx context.Context, task *tatarav1.Task, mutate func(*tatarav1.Task) (bool, *apiError)) (*tatarav1.Task, *apiError) {
	var aerr *apiError
	var latest tatarav1.Task
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		aerr = nil
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(task), &latest); err != nil {
			return err
		}
		if aerr = stillAuthenticated(task, &latest); aerr != nil {
			return nil
		}
		changed, merr := mutate(&latest)
		if merr != nil {
			aerr = merr
			return nil
		}
		if !changed {
			return nil
		}
		return s.opts.Client.Status().Update(ctx, &latest)
	})
	if apierrors.IsConflict(err) {
		// Still contended after the backoff: a 503 is what the cli retries (with the call's
		// Idempotency-Key, so the retry records nothing twice).
		return nil, errorf(http.StatusServiceUnavailable, "task %q is being written by others, retry: %v", task.Name, err)
	}
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to update status of task %q: %v", task.Name, err)
	}
	return &latest, aerr
}

// addActivity records one activity entry of the call with Idempotency-Key requestID ("" for
// none) and mirrors it as an Event; a retry of a recorded call records nothing again.
func (s *Server) addActivity(ctx context.Context, task *tatarav1.Task, typ tatarav1.ActivityType, action, text, requestID string) *apiError {
	now := metav1.Now()
	added := false
	t, err := s.updateStatus(ctx, task, func(t *tatarav1.Task) (bool, *apiError) {
		added = t.Status.AddRequestActivity(now, typ, text, requestID)
		return added, nil
	})
	if err != nil {
		return err
	}
	if added {
		s.event(t, string(typ), action, text)
	}
	return nil
}

func (s *Server) taskNote(ctx context.Context, c *call) (int, any, *apiError) {
	var req noteRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	r := s.notes.record(ctx, c.task, req.Text, c.requestID)
	if r.err != nil {
		return 0, nil, r.err
	}
	if r.recorded {
		s.event(r.task, string(tatarav1.ActivityNote), ToolTaskNote, req.Text)
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) comment(ctx context.Context, c *call) (int, any, *apiError) {
	var req commentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.addActivity(ctx, c.task, tatarav1.ActivityComment, ToolComment, req.Body, c.requestID); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) commentOnIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req issueCommentRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.checkRepo(ctx, c.task, req.Repo); err != nil {
		return 0, nil, err
	}
	repo := req.Repo
	if repo == "" {
		repo = c.task.Spec.Repo
	}
	text := fmt.Sprintf("issue %s#%d: %s", repo, *req.Issue, req.Body)
	if err := s.addActivity(ctx, c.task, tatarav1.ActivityIssueComment, ToolCommentOnIssue, text, c.requestID); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}

func (s *Server) proposeIssue(ctx context.Context, c *call) (int, any, *apiError) {
	var req proposalRequest
	if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, &req); err != nil {
		return 0, nil, err
	}
	if err := s.checkRepo(ctx, c.task, req.Repo); err != nil {
		return 0, nil, err
	}
	now := metav1.Now()
	replay := false
	t, err := s.updateStatus(ctx, c.task, func(t *tatarav1.Task) (bool, *apiError) {
		replay = c.requestID != "" && slices.ContainsFunc(t.Status.Proposals, func(p tatarav1.Proposal) bool { return p.RequestID == c.requestID })
		if replay {
			return false, nil
		}
		if len(t.Status.Proposals) >= tatarav1.MaxProposals {
			return false, errorf(http.StatusConflict, "the task already has the maximum of %d proposals", tatarav1.MaxProposals)
		}
		t.Status.Proposals = append(t.Status.Proposals, tatarav1.Proposal{Title: req.Title, Body: req.Body, Repo: req.Repo, CreatedAt: now, RequestID: c.requestID})
		t.Status.AddRequestActivity(now, tatarav1.ActivityProposal, req.Title, c.requestID)
		return true, nil
	})
	if err != nil {
		return 0, nil, err
	}
	if !replay {
		s.event(t, string(tatarav1.ActivityProposal), ToolProposeIssue, req.Title)
	}
	return http.StatusCreated, recorded{Result: resultRecorded}, nil
}
