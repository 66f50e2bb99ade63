package taskops

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/internalissue"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	issues "tatara.dev/operator/internal/internalissue"
)

// +kubebuilder:rbac:groups=tatara.dev,resources=internalissues,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=tatara.dev,resources=internalissues/status,verbs=get;update

// Internal-issue records: each report an agent sends is counted once in the InternalIssue of its
// group (package internalissue's fingerprint), in the reporting Task's namespace.

// DefaultInternalIssuesPerProject is the default of --internal-issues-per-project: the records one
// Project may hold before the reports of new groups are counted in its overflow record. Far above
// the handful of problems a platform has at once; far below what an agent inventing descriptions
// could fill the API server with.
const DefaultInternalIssuesPerProject = 100

// Bounds of a record's lists.
const (
	recentTasksKept      = 5
	recentRequestIDsKept = 32
)

// Results of a recorded report (tatara_operator_internal_issue_reports_total's result label,
// beside rest's rate_limited).
const (
	ReportNew       = "new"       // the first report of its group: a new record
	ReportCounted   = "counted"   // counted in its group's record
	ReportReopened  = "reopened"  // counted in a record a person had marked resolved, which is open again
	ReportDuplicate = "duplicate" // a retry of a report already counted (its idempotency key): nothing changed
	ReportOverflow  = "overflow"  // a new group past the Project's cap: counted in the overflow record
)

// InternalIssueReport is a validated report and the call's idempotency key ("" for none).
type InternalIssueReport struct {
	internalissue.Report
	RequestID string
}

// InternalIssueRecorded is the answer: the record that counts the report and what happened.
type InternalIssueRecorded struct {
	Record string `json:"record"`
	Count  int64  `json:"count"`
	Result string `json:"result"`
}

// ReportInternalIssue counts a report of the caller's Task in its group's InternalIssue, creating
// the record for a new group, or, once the Project holds its cap of records, counting it in the
// Project's overflow record: a report is never dropped. Reports of one Project are recorded one at
// a time in this process (a new group's cap check and create must not interleave); across replicas
// a concurrent write conflicts and is retried, and two creates of one record meet as AlreadyExists.
func (s *Service) ReportInternalIssue(ctx context.Context, caller *tatarav1.Task, rep InternalIssueReport) (InternalIssueRecorded, *Error) {
	project := caller.Spec.ProjectRef.Name
	unlock, err := s.issueLocks.lock(ctx, caller.Namespace+"/"+project)
	if err != nil {
		return InternalIssueRecorded{}, errorf(Unavailable, "internal issues of project %q are being recorded by others, retry: %v", project, err)
	}
	defer unlock()

	fingerprint := issues.Fingerprint(project, rep.Category, rep.OffendingTool, rep.Description)
	rec := &tatarav1.InternalIssue{ObjectMeta: metav1.ObjectMeta{Namespace: caller.Namespace, Name: issues.RecordName(fingerprint)},
		Spec: tatarav1.InternalIssueSpec{ProjectRef: caller.Spec.ProjectRef, Category: rep.Category, OffendingTool: rep.OffendingTool,
			Fingerprint: fingerprint, GroupingVersion: issues.GroupingVersion}}
	result := ReportCounted
	exists, oerr := s.getIssue(ctx, rec)
	if oerr != nil {
		return InternalIssueRecorded{}, oerr
	}
	if !exists {
		result = ReportNew
		held, oerr := s.projectIssues(ctx, caller.Namespace, project)
		if oerr != nil {
			return InternalIssueRecorded{}, oerr
		}
		if held >= s.opts.InternalIssuesPerProject {
			result = ReportOverflow
			overflow := issues.OverflowName(project)
			rec = &tatarav1.InternalIssue{ObjectMeta: metav1.ObjectMeta{Namespace: caller.Namespace, Name: overflow},
				Spec: tatarav1.InternalIssueSpec{ProjectRef: caller.Spec.ProjectRef, Category: "other",
					Fingerprint: issues.OverflowFingerprint(project), GroupingVersion: issues.GroupingVersion, Overflow: true}}
			if exists, oerr = s.getIssue(ctx, rec); oerr != nil {
				return InternalIssueRecorded{}, oerr
			}
		}
		if !exists {
			err := s.opts.Client.Create(ctx, rec)
			switch {
			case apierrors.IsAlreadyExists(err):
				// Another replica created it a moment ago: count in its record as it is now.
				if _, oerr = s.getIssue(ctx, rec); oerr != nil {
					return InternalIssueRecorded{}, oerr
				}
			case err != nil:
				return InternalIssueRecorded{}, errorf(Internal, "failed to create internal issue %s/%s: %v", rec.Namespace, rec.Name, err)
			}
		}
	}
	return s.countReport(ctx, rec, caller, rep, result)
}

// getIssue reads rec (by its name) from the API server into rec; false when there is none.
func (s *Service) getIssue(ctx context.Context, rec *tatarav1.InternalIssue) (bool, *Error) {
	err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(rec), rec)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, errorf(Internal, "failed to read internal issue %s/%s: %v", rec.Namespace, rec.Name, err)
	}
	return true, nil
}

// projectIssues counts a Project's records, its overflow record aside, from the API server: the
// cache may not have seen a record this process created a moment ago.
func (s *Service) projectIssues(ctx context.Context, namespace, project string) (int, *Error) {
	var list tatarav1.InternalIssueList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return 0, errorf(Internal, "failed to list the internal issues of namespace %q: %v", namespace, err)
	}
	n := 0
	for _, r := range list.Items {
		if r.Spec.ProjectRef.Name == project && !r.Spec.Overflow {
			n++
		}
	}
	return n, nil
}

// countReport adds the report to rec's status, re-reading rec on a conflict. A record a person
// marked resolved is reopened first (its spec, then its status).
func (s *Service) countReport(ctx context.Context, rec *tatarav1.InternalIssue, caller *tatarav1.Task, rep InternalIssueReport, result string) (InternalIssueRecorded, *Error) {
	// reopened survives a conflict on the status write after the spec's: the retry finds the
	// record no longer resolved and must still count the reopen.
	first, reopened := true, false
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		if !first {
			if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(rec), rec); err != nil {
				return err
			}
		}
		first = false
		if rep.RequestID != "" && slices.Contains(rec.Status.RecentRequestIDs, rep.RequestID) {
			result = ReportDuplicate
			return nil
		}
		now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		if rec.Spec.Resolved {
			rec.Spec.Resolved = false
			if err := s.opts.Client.Update(ctx, rec); err != nil {
				return err
			}
			reopened = true
		}
		if reopened {
			rec.Status.Reopens++
			rec.Status.LastReopened = &now
			result = ReportReopened
		}
		st := &rec.Status
		st.Count++
		if st.FirstSeen == nil {
			st.FirstSeen = &now
			st.Description = issues.StoredDescription(rep.Description)
		}
		st.LastSeen = &now
		st.Severity = issues.HigherSeverity(st.Severity, rep.Severity)
		st.RecentTasks = slices.DeleteFunc(st.RecentTasks, func(t tatarav1.InternalIssueTask) bool { return t.Name == caller.Name })
		st.RecentTasks = lastN(append(st.RecentTasks, tatarav1.InternalIssueTask{Kind: caller.Spec.Kind, Name: caller.Name, Reported: now}), recentTasksKept)
		if rep.RequestID != "" {
			st.RecentRequestIDs = lastN(append(st.RecentRequestIDs, rep.RequestID), recentRequestIDsKept)
		}
		return s.opts.Client.Status().Update(ctx, rec)
	})
	if apierrors.IsConflict(err) {
		return InternalIssueRecorded{}, errorf(Unavailable, "internal issue %s/%s is being written by others, retry: %v", rec.Namespace, rec.Name, err)
	}
	if err != nil {
		return InternalIssueRecorded{}, errorf(Internal, "failed to record the report in internal issue %s/%s: %v", rec.Namespace, rec.Name, err)
	}
	if result == ReportReopened && s.opts.Recorder != nil {
		s.opts.Recorder.Eventf(rec, nil, corev1.EventTypeWarning, "Reopened", "Report",
			"reported again by task %s after it was marked resolved (reopen %d)", caller.Name, rec.Status.Reopens)
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.InternalIssueReports.WithLabelValues(result).Inc()
	}
	s.opts.Log.Info("internal issue recorded", "namespace", rec.Namespace, "record", rec.Name, "project", caller.Spec.ProjectRef.Name,
		"task", caller.Name, "category", rep.Category, "severity", rep.Severity, "result", result, "count", rec.Status.Count)
	return InternalIssueRecorded{Record: rec.Name, Count: rec.Status.Count, Result: result}, nil
}

// lastN keeps the last n elements of s.
func lastN[T any](s []T, n int) []T {
	if len(s) > n {
		return slices.Clone(s[len(s)-n:])
	}
	return s
}
