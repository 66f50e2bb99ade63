package taskops

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Call results: what an intent (or a subtask cancel) did. The intents' are also the label values
// of tatara_operator_intents_total.
const (
	ResultRecorded   = "recorded"
	ResultReplaced   = "replaced"
	ResultIdempotent = "idempotent"
	ResultConflict   = "conflict"
)

// IntentChangeSummary is the one intent that is not an outcome (rest's ToolChangeSummary):
// recorded once, and it does not set the outcome.
const IntentChangeSummary = "change_summary"

// Intent is one intent call: Tool is the intent's name, Value its enum field ("" when it has
// none), Summary the text its activity entry shows, and Body the call's body as canonical JSON,
// which decides whether a repeated outcome intent is the same one.
type Intent struct {
	Tool, Value, Summary, Body string
}

// IntentResult is what RecordIntent answers: its result, and the outcome and change summary the
// Task holds after it.
type IntentResult struct {
	Result        string
	Outcome       *tatarav1.TaskOutcome
	ChangeSummary string
}

// applyIntent records an intent in the Task status, following the contract:
// change_summary is recorded once (same summary again: idempotent; a different one: Conflict)
// and does not set the outcome; every other intent is an OUTCOME intent, and the outcome that
// stands is the last one recorded before the Task ends: a different outcome intent (or the same
// one with a different body) replaces the earlier one, and the same intent with the same body is
// idempotent. Last-wins is what keeps a reviewer's verdict its own: anything else in its pod that
// records an outcome first (code from the branch under review) cannot pre-empt the verdict the
// reviewer records after it. Every recorded or replaced outcome stays in the activity log.
// It returns the result; status is changed only when the result is recorded or replaced.
func applyIntent(st *tatarav1.TaskStatus, in Intent, now metav1.Time) (string, *Error) {
	if in.Tool == IntentChangeSummary {
		switch st.ChangeSummary {
		case "":
			st.ChangeSummary = in.Summary
			st.AddActivity(now, tatarav1.ActivityIntent, "change_summary: "+in.Summary)
			return ResultRecorded, nil
		case in.Summary:
			return ResultIdempotent, nil
		default:
			return ResultConflict, errorf(Conflict, "change_summary is already recorded with a different summary")
		}
	}
	previous := st.Outcome
	if previous != nil && previous.Intent == in.Tool && previous.Body == in.Body {
		return ResultIdempotent, nil
	}
	st.Outcome = &tatarav1.TaskOutcome{Intent: in.Tool, Value: in.Value, Body: in.Body, RecordedAt: now}
	entry := fmt.Sprintf("%s%s: %s", in.Tool, valueSuffix(in.Value), in.Summary)
	if previous == nil {
		st.AddActivity(now, tatarav1.ActivityIntent, entry)
		return ResultRecorded, nil
	}
	st.AddActivity(now, tatarav1.ActivityIntent, fmt.Sprintf("%s (replaces %s%s)", entry, previous.Intent, valueSuffix(previous.Value)))
	return ResultReplaced, nil
}

func valueSuffix(v string) string {
	if v == "" {
		return ""
	}
	return " (" + v + ")"
}

// RecordIntent records the intent in the caller's status (applyIntent), counts it in
// tatara_operator_intents_total, and mirrors a recorded or replaced one as an Event.
func (s *Service) RecordIntent(ctx context.Context, caller *tatarav1.Task, in Intent) (IntentResult, *Error) {
	now := metav1.NewTime(time.Now())
	var result string
	t, err := s.updateStatus(ctx, caller, func(t *tatarav1.Task) (bool, *Error) {
		var ierr *Error
		result, ierr = applyIntent(&t.Status, in, now)
		return result == ResultRecorded || result == ResultReplaced, ierr
	})
	if result != "" && s.opts.Metrics != nil {
		s.opts.Metrics.IntentsRecorded.WithLabelValues(in.Tool, result).Inc()
	}
	if err != nil {
		return IntentResult{}, err
	}
	if result == ResultRecorded || result == ResultReplaced {
		s.event(t, "Intent", in.Tool, fmt.Sprintf("%s%s: %s", in.Tool, valueSuffix(in.Value), in.Summary))
	}
	return IntentResult{Result: result, Outcome: t.Status.Outcome, ChangeSummary: t.Status.ChangeSummary}, nil
}
