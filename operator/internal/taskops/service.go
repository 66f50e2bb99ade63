// Package taskops is what a call of the operator REST API decides, apart from HTTP: subtask
// creation with its policy, limits and per-Project lock (a Lease across replicas), a review
// subtask's operator-written directive, task notes written by group commit, intents, comments,
// issue comments and proposals recorded in the caller's Task status (and mirrored as Events), the
// reads of a Task's Project, its Tasks and its subtasks, the checks that the caller's token still
// works, and a pool pod's claim. The HTTP layer (routes, authentication, authorization, limits,
// encoding) is internal/rest: it decodes a request, calls one Service method, and maps the
// method's *Error to a status by its Code.
package taskops

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/metrics"
)

// Options configure a Service.
type Options struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly, for read-modify-write of Task objects.
	APIReader client.Reader
	// Recorder emits the Events that mirror every recorded write; nil emits none.
	Recorder events.EventRecorder
	// Metrics counts the intents recorded; nil counts nothing.
	Metrics *metrics.Metrics
	// Log receives what a decision reports beside its answer; nil discards it.
	Log *slog.Logger
	// LockNamespace is where the Leases that serialise subtask creation per Project across every
	// replica live (the operator's own namespace). Empty serialises inside this process only,
	// which holds the limits for one replica alone.
	LockNamespace string
	// InternalIssuesPerProject is the most InternalIssue records one Project holds, its overflow
	// record aside; 0 means DefaultInternalIssuesPerProject.
	InternalIssuesPerProject int
}

// Service makes the decisions of the REST API's calls. Every replica has one; all state it
// shares with the other replicas lives in the API server.
type Service struct {
	opts Options
	// projectLocks and sharedLocks serialise subtask creation per Project (LockProject);
	// sharedLocks is nil without Options.LockNamespace.
	projectLocks keyedLock
	sharedLocks  *leaseLock
	// issueLocks serialises the internal-issue reports of each Project in this process.
	issueLocks keyedLock
	// notes records task notes, a group commit per Task.
	notes *noteCommitter
}

// New builds a Service.
func New(opts Options) *Service {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.InternalIssuesPerProject <= 0 {
		opts.InternalIssuesPerProject = DefaultInternalIssuesPerProject
	}
	s := &Service{opts: opts, notes: newNoteCommitter(opts.Client, opts.APIReader)}
	if opts.LockNamespace != "" {
		s.sharedLocks = newLeaseLock(opts.Client, opts.APIReader, opts.LockNamespace)
	}
	return s
}

// Event actions: the operator tool whose call an Event mirrors. They are the names of rest's
// Tool* constants, which name the routes (rest's TestEventActionsAreToolNames keeps them equal).
const (
	ActionTaskNote       = "task_note"
	ActionComment        = "comment"
	ActionCommentOnIssue = "comment_on_issue"
	ActionProposeIssue   = "propose_issue"
	ActionSubtaskCreate  = "subtask_create"
	ActionSubtaskCancel  = "subtask_cancel"
)

// event mirrors a recorded write as a Kubernetes Event on the Task; notes are cut to the
// 1 KiB events.k8s.io limit.
func (s *Service) event(task *tatarav1.Task, reason, action, note string) {
	if s.opts.Recorder == nil {
		return
	}
	const maxNote = 1000
	if len(note) > maxNote {
		note = note[:maxNote] + "..."
	}
	// The Event regards the Task by name and UID only: a reference with the resourceVersion of
	// each write would make every Event unique, and the events library could not fold a Task's
	// repeated writes (a note loop) into one series.
	regarding := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: task.Namespace, Name: task.Name, UID: task.UID}}
	s.opts.Recorder.Eventf(regarding, nil, corev1.EventTypeNormal, reason, action, "%s", note)
}
