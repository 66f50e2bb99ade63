package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func TestPendingRequests(t *testing.T) {
	tasks := []tatarav1.Task{
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Namespace: "n"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "has-pod", Namespace: "n"}, Status: tatarav1.TaskStatus{PodName: "p"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cancelled", Namespace: "n"}, Status: tatarav1.TaskStatus{Phase: tatarav1.PhaseCancelled}},
		{ObjectMeta: metav1.ObjectMeta{Name: "retry", Namespace: "n"}, Status: tatarav1.TaskStatus{PodName: "p", Phase: tatarav1.PhasePending,
			Attempts: []tatarav1.TaskAttempt{{Number: 1, FinishedAt: &metav1.Time{}, Reason: tatarav1.ReasonEvicted}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "n"}, Status: tatarav1.TaskStatus{PodName: "p", Phase: tatarav1.PhaseRunning,
			Attempts: []tatarav1.TaskAttempt{{Number: 1}}}},
	}
	reqs := pendingRequests(tasks)
	if len(reqs) != 2 || reqs[0].Name != "waiting" || reqs[0].Namespace != "n" || reqs[1].Name != "retry" {
		t.Fatalf("requests %+v, want n/waiting and n/retry (a retry waits for its pod too)", reqs)
	}
}

func TestActivityIsBounded(t *testing.T) {
	var st tatarav1.TaskStatus
	for i := range tatarav1.MaxActivity + 7 {
		st.AddActivity(metav1.Now(), tatarav1.ActivityNote, strings.Repeat("é", i))
	}
	if len(st.Activity) != tatarav1.MaxActivity {
		t.Fatalf("%d entries, want %d", len(st.Activity), tatarav1.MaxActivity)
	}
	if got := len([]rune(st.Activity[0].Text)); got != 7 {
		t.Fatalf("oldest kept entry has %d runes, want 7 (the first 7 dropped)", got)
	}
	st.AddActivity(metav1.Now(), tatarav1.ActivityNote, strings.Repeat("é", tatarav1.MaxActivityText))
	last := st.Activity[len(st.Activity)-1]
	if !last.Truncated || len(last.Text) > tatarav1.MaxActivityText || !strings.HasSuffix(last.Text, "é") {
		t.Fatalf("long entry: truncated=%v len=%d (must be cut on a rune boundary)", last.Truncated, len(last.Text))
	}
}
