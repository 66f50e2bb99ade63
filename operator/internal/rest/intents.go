package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Intent results, also the label values of tatara_operator_intents_total.
const (
	resultRecorded   = "recorded"
	resultReplaced   = "replaced"
	resultIdempotent = "idempotent"
	resultConflict   = "conflict"
)

// applyIntent records an intent in the Task status, following the contract:
// change_summary is recorded once (same summary again: idempotent; a different one: 409)
// and does not set the outcome; every other intent is an OUTCOME intent, and the outcome that
// stands is the last one recorded before the Task ends: a different outcome intent (or the same
// one with a different body) replaces the earlier one, and the same intent with the same body is
// idempotent. Last-wins is what keeps a reviewer's verdict its own: anything else in its pod that
// records an outcome first (code from the branch under review) cannot pre-empt the verdict the
// reviewer records after it. Every recorded or replaced outcome stays in the activity log.
// It returns the result; status is changed only when the result is recorded or replaced.
func applyIntent(st *tatarav1.TaskStatus, tool string, req intentRequest, body string, now metav1.Time) (string, *apiError) {
	if tool == ToolChangeSummary {
		switch st.ChangeSummary {
		case "":
			st.ChangeSummary = req.summary()
			st.AddActivity(now, tatarav1.ActivityIntent, "change_summary: "+req.summary())
			return resultRecorded, nil
		case req.summary():
			return resultIdempotent, nil
		default:
			return resultConflict, errorf(http.StatusConflict, "change_summary is already recorded with a different summary")
		}
	}
	previous := st.Outcome
	if previous != nil && previous.Intent == tool && previous.Body == body {
		return resultIdempotent, nil
	}
	st.Outcome = &tatarav1.TaskOutcome{Intent: tool, Value: req.value(), Body: body, RecordedAt: now}
	entry := fmt.Sprintf("%s%s: %s", tool, valueSuffix(req.value()), req.summary())
	if previous == nil {
		st.AddActivity(now, tatarav1.ActivityIntent, entry)
		return resultRecorded, nil
	}
	st.AddActivity(now, tatarav1.ActivityIntent, fmt.Sprintf("%s (replaces %s%s)", entry, previous.Intent, valueSuffix(previous.Value)))
	return resultReplaced, nil
}

func valueSuffix(v string) string {
	if v == "" {
		return ""
	}
	return " (" + v + ")"
}

func (s *Server) intentHandler(tool string) handler {
	return func(ctx context.Context, c *call) (int, any, *apiError) {
		req := newIntentRequest(tool)
		if err := decodeBody(c.w, c.r, s.opts.MaxBodyBytes, req); err != nil {
			return 0, nil, err
		}
		body, err := canonical(req)
		if err != nil {
			return 0, nil, errorf(http.StatusInternalServerError, "%v", err)
		}
		now := metav1.NewTime(time.Now())
		var result string
		t, aerr := s.updateStatus(ctx, c.task, func(t *tatarav1.Task) (bool, *apiError) {
			var ierr *apiError
			result, ierr = applyIntent(&t.Status, tool, req, body, now)
			return result == resultRecorded || result == resultReplaced, ierr
		})
		if result != "" && s.opts.Metrics != nil {
			s.opts.Metrics.IntentsRecorded.WithLabelValues(tool, result).Inc()
		}
		if aerr != nil {
			return 0, nil, aerr
		}
		if result == resultRecorded || result == resultReplaced {
			s.event(t, "Intent", tool, fmt.Sprintf("%s%s: %s", tool, valueSuffix(req.value()), req.summary()))
		}
		return http.StatusOK, map[string]any{"result": result, "outcome": t.Status.Outcome, "changeSummary": t.Status.ChangeSummary}, nil
	}
}
