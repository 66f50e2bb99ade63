package taskops

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"tatara.dev/cli/pkg/internalissue"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func newIssueService(t *testing.T, perProject int) (*Service, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := tatarav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&tatarav1.InternalIssue{}).Build()
	return New(Options{Client: c, APIReader: c, InternalIssuesPerProject: perProject}), c
}

func reporter(name string) *tatarav1.Task {
	return &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "shop"}}}
}

func issueReport(category, severity, description, key string) InternalIssueReport {
	return InternalIssueReport{Report: internalissue.Report{Category: category, Severity: severity, Description: description,
		OffendingTool: "memory_search"}, RequestID: key}
}

func mustReport(t *testing.T, s *Service, task *tatarav1.Task, rep InternalIssueReport) InternalIssueRecorded {
	t.Helper()
	got, err := s.ReportInternalIssue(context.Background(), task, rep)
	if err != nil {
		t.Fatalf("ReportInternalIssue(%s, %+v): %v", task.Name, rep, err)
	}
	return got
}

func getIssue(t *testing.T, c client.Client, name string) tatarav1.InternalIssue {
	t.Helper()
	var rec tatarav1.InternalIssue
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReportInternalIssueGroups: two Tasks reporting one problem make one record counting both; a
// report of another category makes a second record; the record keeps the highest severity.
func TestReportInternalIssueGroups(t *testing.T) {
	s, c := newIssueService(t, 0)
	first := mustReport(t, s, reporter("impl-a"), issueReport("tool_error", "warn", "memory_search timed out after 30s", "k1"))
	second := mustReport(t, s, reporter("impl-b"), issueReport("tool_error", "error", "memory_search timed out after 45s", "k2"))
	other := mustReport(t, s, reporter("impl-b"), issueReport("auth", "warn", "memory_search timed out after 45s", "k3"))

	if first.Result != ReportNew || second.Result != ReportCounted || second.Record != first.Record || second.Count != 2 {
		t.Fatalf("first %+v, second %+v: want a new record, then counted in it with count 2", first, second)
	}
	if other.Result != ReportNew || other.Record == first.Record {
		t.Fatalf("other category %+v: want a record of its own", other)
	}
	rec := getIssue(t, c, first.Record)
	var tasks []string
	for _, rt := range rec.Status.RecentTasks {
		tasks = append(tasks, rt.Name)
	}
	if rec.Status.Count != 2 || rec.Status.Severity != "error" || strings.Join(tasks, ",") != "impl-a,impl-b" ||
		rec.Status.Description != "memory_search timed out after 30s" || rec.Spec.Category != "tool_error" ||
		rec.Spec.OffendingTool != "memory_search" || rec.Spec.ProjectRef.Name != "shop" || rec.Status.FirstSeen == nil {
		t.Fatalf("record %+v / %+v: want count 2, severity error, tasks impl-a,impl-b, the first description", rec.Spec, rec.Status)
	}
	var list tatarav1.InternalIssueList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("records: %d (%v), want 2", len(list.Items), err)
	}
}

// TestReportInternalIssueIsIdempotent: a report sent again with its idempotency key (a retry after
// a lost answer, possibly to another replica) is not counted again.
func TestReportInternalIssueIsIdempotent(t *testing.T) {
	s, c := newIssueService(t, 0)
	task := reporter("impl-a")
	mustReport(t, s, task, issueReport("tool_error", "error", "broken", "key-1"))
	again := mustReport(t, s, task, issueReport("tool_error", "error", "broken", "key-1"))
	if again.Result != ReportDuplicate || again.Count != 1 {
		t.Fatalf("retry: %+v, want duplicate with count 1", again)
	}
	// Without a key, every report counts.
	mustReport(t, s, task, issueReport("tool_error", "error", "broken", ""))
	mustReport(t, s, task, issueReport("tool_error", "error", "broken", ""))
	if rec := getIssue(t, c, again.Record); rec.Status.Count != 3 {
		t.Fatalf("count %d, want 3", rec.Status.Count)
	}
}

// TestReportInternalIssueReopens: a report of a group a person marked resolved opens it again and
// says so.
func TestReportInternalIssueReopens(t *testing.T) {
	s, c := newIssueService(t, 0)
	first := mustReport(t, s, reporter("impl-a"), issueReport("workspace_broken", "error", "clone failed", "k1"))
	rec := getIssue(t, c, first.Record)
	rec.Spec.Resolved = true
	if err := c.Update(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	got := mustReport(t, s, reporter("impl-b"), issueReport("workspace_broken", "error", "clone failed", "k2"))
	rec = getIssue(t, c, first.Record)
	if got.Result != ReportReopened || rec.Spec.Resolved || rec.Status.Reopens != 1 || rec.Status.LastReopened == nil || rec.Status.Count != 2 {
		t.Fatalf("after a report of a resolved record: %+v, spec %+v, status %+v; want reopened, unresolved, 1 reopen, count 2", got, rec.Spec, rec.Status)
	}
	if again := mustReport(t, s, reporter("impl-c"), issueReport("workspace_broken", "error", "clone failed", "k3")); again.Result != ReportCounted {
		t.Fatalf("a report of the open record: %+v, want counted", again)
	}
}

// TestReportInternalIssueOverflow: at the Project's cap, a new group is counted in the Project's
// overflow record, never dropped; known groups keep counting in their own; another Project has a
// cap of its own.
func TestReportInternalIssueOverflow(t *testing.T) {
	s, c := newIssueService(t, 2)
	task := reporter("impl-a")
	a := mustReport(t, s, task, issueReport("other", "warn", "problem one", ""))
	mustReport(t, s, task, issueReport("other", "warn", "problem two", ""))
	third := mustReport(t, s, task, issueReport("other", "error", "problem three", ""))
	fourth := mustReport(t, s, task, issueReport("auth", "warn", "problem four", ""))
	known := mustReport(t, s, task, issueReport("other", "warn", "problem one", ""))
	if third.Result != ReportOverflow || fourth.Result != ReportOverflow || third.Record != fourth.Record || fourth.Count != 2 {
		t.Fatalf("past the cap: %+v, %+v; want both counted in one overflow record, count 2", third, fourth)
	}
	if known.Record != a.Record || known.Count != 2 {
		t.Fatalf("a known group past the cap: %+v, want counted in %s", known, a.Record)
	}
	of := getIssue(t, c, third.Record)
	if !of.Spec.Overflow || of.Status.Severity != "error" || of.Status.Count != 2 {
		t.Fatalf("overflow record %+v / %+v", of.Spec, of.Status)
	}
	otherProject := reporter("impl-z")
	otherProject.Spec.ProjectRef.Name = "bank"
	if got := mustReport(t, s, otherProject, issueReport("other", "warn", "problem three", "")); got.Result != ReportNew {
		t.Fatalf("another Project's first report: %+v, want a new record", got)
	}
}

// TestReportInternalIssueBoundsItsLists: a record keeps the last 5 Tasks (each once, the latest
// last) and the last 32 idempotency keys, however many reports it counts.
func TestReportInternalIssueBoundsItsLists(t *testing.T) {
	s, c := newIssueService(t, 0)
	var got InternalIssueRecorded
	for i := range 40 {
		got = mustReport(t, s, reporter(fmt.Sprintf("impl-%d", i%8)), issueReport("tool_error", "warn", "same problem", fmt.Sprintf("key-%d", i)))
	}
	rec := getIssue(t, c, got.Record)
	st := rec.Status
	if st.Count != 40 || len(st.RecentTasks) != recentTasksKept || st.RecentTasks[len(st.RecentTasks)-1].Name != "impl-7" ||
		len(st.RecentRequestIDs) != recentRequestIDsKept || st.RecentRequestIDs[len(st.RecentRequestIDs)-1] != "key-39" {
		t.Fatalf("status %+v: want count 40, 5 tasks ending impl-7, 32 keys ending key-39", st)
	}
	seen := map[string]bool{}
	for _, rt := range st.RecentTasks {
		if seen[rt.Name] {
			t.Fatalf("task %s listed twice: %+v", rt.Name, st.RecentTasks)
		}
		seen[rt.Name] = true
	}
}

// TestReportInternalIssueMasksTheDescription: a secret in a report never reaches the record.
func TestReportInternalIssueMasksTheDescription(t *testing.T) {
	s, c := newIssueService(t, 0)
	key := "sk-ant-" + strings.Repeat("k", 40)
	got := mustReport(t, s, reporter("impl-a"), issueReport("auth", "error", "the model key "+key+" was refused", ""))
	if rec := getIssue(t, c, got.Record); strings.Contains(rec.Status.Description, key) {
		t.Fatalf("description %q holds the key", rec.Status.Description)
	}
}

// TestReportInternalIssueMeetsAnotherReplicasCreate: the record this replica found missing was
// created by another before its own create; the report is counted in that record.
func TestReportInternalIssueMeetsAnotherReplicasCreate(t *testing.T) {
	s, c := newIssueService(t, 0)
	first := mustReport(t, s, reporter("impl-a"), issueReport("auth", "warn", "401 from memory", "k1"))
	// This replica's first read misses the record (it came before the other's create).
	blind := New(Options{Client: c, APIReader: &missesFirstIssueRead{Client: c}})
	got, err := blind.ReportInternalIssue(context.Background(), reporter("impl-b"), issueReport("auth", "warn", "401 from memory", "k2"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Record != first.Record || got.Count != 2 {
		t.Fatalf("%+v: want counted in %s with count 2", got, first.Record)
	}
}

// missesFirstIssueRead answers NotFound to its first read of an InternalIssue.
type missesFirstIssueRead struct {
	client.Client
	missed bool
}

func (m *missesFirstIssueRead) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*tatarav1.InternalIssue); ok && !m.missed {
		m.missed = true
		return apierrors.NewNotFound(tatarav1.GroupVersion.WithResource("internalissues").GroupResource(), key.Name)
	}
	return m.Client.Get(ctx, key, obj, opts...)
}
