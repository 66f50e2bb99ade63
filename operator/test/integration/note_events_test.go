package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestNotesAggregateIntoOneEvent: a Task's notes are mirrored as Events that the events library
// folds into one series per Task, reason and action (its key leaves the note out), so an agent
// writing notes in a loop costs the API server one Event, not one per note; the Task keeps the
// last MaxNotes notes and counts the others, apart from its activity log.
func TestNotesAggregateIntoOneEvent(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "noisy", "p", tatarav1.KindImplement)
	tok := token(t, ns, task.Name)
	const notes = 60
	for i := range notes {
		if code, raw := keyedCall(t, op.url, "/api/v1/tasks/noisy/notes", tok, "", fmt.Sprintf(`{"text":"note %d"}`, i)); code != http.StatusCreated {
			t.Fatalf("note %d: %d %s", i, code, raw)
		}
	}
	var events eventsv1.EventList
	eventually(t, 20*time.Second, "the notes' Event", func() error {
		if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == task.Name && e.Reason == string(tatarav1.ActivityNote) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event for task %s yet (%d Events)", tatarav1.ActivityNote, task.Name, len(events.Items))
	})
	time.Sleep(2 * time.Second) // what else the recorder would write
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.Name == task.Name && e.Reason == string(tatarav1.ActivityNote) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d notes made %d Note Events, want 1 (a series)", notes, n)
	}
	var cur tatarav1.Task
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(task), &cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Status.Notes) != tatarav1.MaxNotes || cur.Status.Notes[len(cur.Status.Notes)-1].Text != fmt.Sprintf("note %d", notes-1) ||
		cur.Status.NotesDropped != notes-tatarav1.MaxNotes {
		t.Errorf("notes hold %d entries ending %+v, %d dropped; want the last %d notes and %d dropped",
			len(cur.Status.Notes), cur.Status.Notes[len(cur.Status.Notes)-1], cur.Status.NotesDropped, tatarav1.MaxNotes, notes-tatarav1.MaxNotes)
	}
	for _, e := range cur.Status.Activity {
		if e.Type == tatarav1.ActivityNote {
			t.Errorf("activity holds a note %+v: notes have their own history", e)
		}
	}
}
