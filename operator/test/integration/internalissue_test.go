package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/internalissue"
)

// TestInternalIssueRecords: reports of two Tasks of one Project, through the REST API, become one
// InternalIssue in the API server with both Tasks; another category makes a second; a person's
// resolve is undone by the next report, which counts a reopen; the open-records gauge follows.
func TestInternalIssueRecords(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	impl := newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	review := newTask(t, ns, "rev", "p", tatarav1.KindReview)
	implTok, revTok := token(t, ns, impl.Name), token(t, ns, review.Name)
	report := func(task, tok, body string, want int) response {
		t.Helper()
		r := call(t, op.url, "POST", "/api/v1/tasks/"+task+"/internal-issues", tok, body)
		if r.code != want {
			t.Fatalf("report of %s: %d %s, want %d", task, r.code, r.raw, want)
		}
		return r
	}
	first := report("impl", implTok, `{"category":"tool_error","severity":"warn","description":"memory_search timed out after 30s","offending_tool":"memory_search"}`, 201)
	report("rev", revTok, `{"category":"tool_error","description":"memory_search timed out after 41s","offending_tool":"memory_search"}`, 200)
	other := report("rev", revTok, `{"category":"auth","description":"memory answered 401"}`, 201)
	name, _ := first.body["record"].(string)
	if name == "" || other.body["record"] == name {
		t.Fatalf("records %v and %v: want two", first.body, other.body)
	}

	var rec tatarav1.InternalIssue
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &rec); err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, rt := range rec.Status.RecentTasks {
		tasks = append(tasks, string(rt.Kind)+"/"+rt.Name)
	}
	if rec.Status.Count != 2 || rec.Status.Severity != "error" || strings.Join(tasks, ",") != "implement/impl,review/rev" ||
		rec.Spec.GroupingVersion != internalissue.GroupingVersion || rec.Spec.ProjectRef.Name != "p" || rec.Status.LastSeen == nil {
		t.Fatalf("record spec %+v status %+v: want count 2, severity error, both Tasks", rec.Spec, rec.Status)
	}
	waitForOpen(t, op, "tool_error", "error", 1)

	// A person resolves it (kubectl patch --type merge -p '{"spec":{"resolved":true}}').
	if err := k8s.Patch(context.Background(), &rec, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"resolved":true}}`))); err != nil {
		t.Fatal(err)
	}
	waitForOpen(t, op, "tool_error", "error", 0)
	again := report("impl", implTok, `{"category":"tool_error","description":"memory_search timed out after 12s","offending_tool":"memory_search"}`, 200)
	if again.body["result"] != "reopened" {
		t.Fatalf("a report of the resolved record: %v, want reopened", again.body)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&rec), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Spec.Resolved || rec.Status.Reopens != 1 || rec.Status.Count != 3 {
		t.Fatalf("after the reopen: spec %+v status %+v", rec.Spec, rec.Status)
	}
	waitForOpen(t, op, "tool_error", "error", 1)
}

// TestInternalIssueSchema: the API server itself refuses a record the operator would never write.
func TestInternalIssueSchema(t *testing.T) {
	ns := newNamespace(t)
	valid := func() *tatarav1.InternalIssue {
		return &tatarav1.InternalIssue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ii-" + strings.Repeat("a", 20)},
			Spec: tatarav1.InternalIssueSpec{ProjectRef: tatarav1.ProjectReference{Name: "p"}, Category: "other",
				Fingerprint: strings.Repeat("a", 64), GroupingVersion: 1}}
	}
	for name, mutate := range map[string]func(*tatarav1.InternalIssue){
		"unknown category":     func(r *tatarav1.InternalIssue) { r.Spec.Category = "bug" },
		"not a fingerprint":    func(r *tatarav1.InternalIssue) { r.Spec.Fingerprint = "abc" },
		"no grouping rule":     func(r *tatarav1.InternalIssue) { r.Spec.GroupingVersion = 0 },
		"a tool name too long": func(r *tatarav1.InternalIssue) { r.Spec.OffendingTool = strings.Repeat("t", 257) },
	} {
		r := valid()
		mutate(r)
		if err := k8s.Create(context.Background(), r); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create answered %v, want Invalid", name, err)
		}
	}
	if err := k8s.Create(context.Background(), valid()); err != nil {
		t.Fatalf("a valid record: %v", err)
	}
}

// waitForOpen waits until the operator's gauge of open records of category and severity is want.
func waitForOpen(t *testing.T, op *operator, category, severity string, want float64) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("tatara_operator_internal_issues_open{category=%q,severity=%q} = %v", category, severity, want), func() error {
		families, err := op.reg.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			if f.GetName() != internalissue.OpenGaugeName {
				continue
			}
			for _, m := range f.GetMetric() {
				if label(m, "category") == category && label(m, "severity") == severity {
					if got := m.GetGauge().GetValue(); got != want {
						return fmt.Errorf("gauge is %v", got)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("no %s series", internalissue.OpenGaugeName)
	})
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
