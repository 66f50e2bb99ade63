//go:build e2e

package suite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// floodReports is how many reports the flooding agent sends: well past the operator's default
// burst of 10 reports per Task.
const floodReports = 25

// TestInternalIssueRecords: under the production defaults, the real agent CLI's reports become
// InternalIssue records in the cluster. Two Tasks reporting one problem (in different words: other
// numbers) make one record that counts 2 and names both; another category makes a second record;
// a Task flooding reports of made-up problems gets at most the per-Task burst recorded, and every
// one of its reports is accounted for (recorded, or refused and counted by the cli), while the
// operator stays healthy. Prometheus scrapes the open-records gauge.
func TestInternalIssueRecords(t *testing.T) {
	sharedFeature(t)
	var tasks []*tatarav1.Task
	var project, flood *tatarav1.Project
	report := func(category, severity, description string) string {
		return fmt.Sprintf(`call report_internal_issue {"category":%q,"severity":%q,"description":%q,"offending_tool":"memory_search"}`,
			category, severity, description)
	}
	f := features.New("report_internal_issue records: grouped, bounded, real agent").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "issue-records", withToolSearch(tatarav1.ToolSearchOff))
			flood = projectCopy(ctx, t, cfg, "issue-flood", withToolSearch(tatarav1.ToolSearchOff))
			first := newTask("issue-first", project.Name, tatarav1.KindBrainstorm, modelScript("issue-first",
				report("tool_error", "warn", "memory_search timed out after 30s"),
				report("workspace_broken", "error", "the clone of demo has no HEAD"),
				"say reported"))
			second := newTask("issue-second", project.Name, tatarav1.KindTriageIssue, modelScript("issue-second",
				report("tool_error", "error", "memory_search timed out after 45s"),
				"say reported"))
			var steps []string
			for i := range floodReports {
				// Letters, not numbers: numbers are normalised away, and each report must be a
				// problem of its own.
				steps = append(steps, report("other", "warn", "made-up problem "+string(rune('a'+i/26))+string(rune('a'+i%26))))
			}
			flooder := newTask("issue-flood", flood.Name, tatarav1.KindBrainstorm, modelScript("issue-flood", append(steps, "say flooded")...))
			tasks = []*tatarav1.Task{first, second, flooder}
			for _, task := range tasks {
				if err := r.Create(ctx, task); err != nil {
					t.Fatal(err)
				}
			}
			return ctx
		}).
		Assess("one record per problem, counting both Tasks", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			for _, task := range tasks[:2] {
				terminalPod(ctx, t, r, task) // its cli has sent its reports
			}
			records := projectIssues(ctx, t, r, project.Name)
			if len(records) != 2 {
				t.Fatalf("records of %s: %v, want 2", project.Name, describeIssues(records))
			}
			byCategory := map[string]tatarav1.InternalIssue{}
			for _, rec := range records {
				byCategory[rec.Spec.Category] = rec
			}
			timeout, broken := byCategory["tool_error"], byCategory["workspace_broken"]
			var reporters []string
			for _, rt := range timeout.Status.RecentTasks {
				reporters = append(reporters, string(rt.Kind)+"/"+rt.Name)
			}
			slices.Sort(reporters)
			if timeout.Status.Count != 2 || timeout.Status.Severity != "error" || timeout.Spec.OffendingTool != "memory_search" ||
				strings.Join(reporters, ",") != "brainstorm/issue-first,triageIssue/issue-second" {
				t.Errorf("tool_error record %s: count %d, severity %s, tasks %v; want 2, error, both Tasks", timeout.Name, timeout.Status.Count, timeout.Status.Severity, reporters)
			}
			if broken.Status.Count != 1 || broken.Status.Severity != "error" || broken.Status.Description != "the clone of demo has no HEAD" {
				t.Errorf("workspace_broken record %s: %+v", broken.Name, broken.Status)
			}
			return ctx
		}).
		Assess("a flooding Task stays within its burst, and every report is accounted for", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := terminalPod(ctx, t, r, tasks[2])
			records := projectIssues(ctx, t, r, flood.Name)
			var recorded int64
			for _, rec := range records {
				recorded += rec.Status.Count
			}
			refused := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool {
				return rec["msg"] == "internal issue not recorded by the operator" && rec["outcome"] == "rate_limited"
			})
			logf("flood: %d of %d reports recorded in %d records, %d refused by the per-Task limit", recorded, floodReports, len(records), len(refused))
			var op appsv1.Deployment
			if err := r.Get(ctx, operatorDeployment, systemNamespace, &op); err != nil {
				t.Fatal(err)
			}
			// 10 at once, then one a minute, counted by each replica on its own (a connection may
			// reach either): the flood lasts about a minute.
			most := int64(*op.Spec.Replicas) * 12
			if recorded < 10 || recorded > most || int(recorded)+len(refused) != floodReports {
				t.Errorf("flood: %d recorded, %d refused: want 10 to %d recorded and the rest refused, %d in all", recorded, len(refused), most, floodReports)
			}
			if op.Status.AvailableReplicas != *op.Spec.Replicas {
				t.Errorf("operator: %d of %d replicas available after the flood", op.Status.AvailableReplicas, *op.Spec.Replicas)
			}
			return ctx
		}).
		Assess("Prometheus scrapes the open records", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, cs := clients(t, cfg)
			waitProm(ctx, t, cs, "open workspace_broken records", `max(tatara_operator_internal_issues_open{category="workspace_broken",severity="error"})`, oneSample(1))
			return ctx
		}).
		Teardown(deleting(&tasks, &project, &flood)).Feature()
	testenv.Test(t, f)
}

// projectIssues lists the InternalIssue records of a Project in the agent namespace.
func projectIssues(ctx context.Context, t *testing.T, r *resources.Resources, project string) []tatarav1.InternalIssue {
	t.Helper()
	var list tatarav1.InternalIssueList
	if err := r.WithNamespace(agentNamespace).List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(rec tatarav1.InternalIssue) bool { return rec.Spec.ProjectRef.Name != project })
}

func describeIssues(records []tatarav1.InternalIssue) []string {
	var out []string
	for _, rec := range records {
		out = append(out, fmt.Sprintf("%s %s/%s count %d", rec.Name, rec.Spec.Category, rec.Status.Severity, rec.Status.Count))
	}
	return out
}
