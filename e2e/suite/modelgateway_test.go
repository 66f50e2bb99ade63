//go:build e2e

package suite

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/e2e/internal/model"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// sentUsage sums what the model stand-in reported for a script's requests: the usage the Task's
// model gateway must have metered into its status.
func sentUsage(records []model.Record) tatarav1.ModelUsage {
	var u tatarav1.ModelUsage
	for _, rec := range records {
		u.Requests++
		u.InputTokens += int64(rec.Sent.InputTokens)
		u.OutputTokens += int64(rec.Sent.OutputTokens)
		u.CacheReadInputTokens += int64(rec.Sent.CacheReadInputTokens)
		u.Tokens += int64(rec.Sent.Tokens())
	}
	return u
}

// TestModelGatewayMetersAndBudgets: the kind environment's agents reach the model stand-in only
// through their pod's model gateway, which holds the key the stand-in demands (the agent has
// none). A Task's status.usage is exactly what the stand-in reported for its requests; a Task of
// a Project whose budget its first model request spends is refused its second request by the
// gateway and ends BudgetExceeded, its usage recorded.
func TestModelGatewayMetersAndBudgets(t *testing.T) {
	sharedFeature(t)
	const metered, budgeted = "model-metered", "model-budget"
	f := features.New("the model gateway meters every token and ends a Task at its budget").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project := projectCopy(ctx, t, cfg, "model-budget", func(p *tatarav1.Project) {
				if p.Spec.Agent.Model == nil {
					t.Fatal("the kind environment's Project has no spec.agent.model")
				}
				p.Spec.Agent.Model.TaskTokenBudget = 1
			})
			for _, task := range []*tatarav1.Task{
				newTask(metered, kindProject, tatarav1.KindImplement, modelScript(metered, bashStep("echo metered"), "say done")),
				newTask(budgeted, project.Name, tatarav1.KindImplement, modelScript(budgeted, bashStep("echo one request"), "say never reached")),
			} {
				if err := r.Create(ctx, task); err != nil {
					t.Fatal(err)
				}
			}
			return ctx
		}).
		Assess("a Task's usage is what the model reported", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, newTask(metered, kindProject, tatarav1.KindImplement, ""))
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Fatalf("task %s ended %s (%+v): the stand-in answers only the key the gateway holds", metered, cur.Status.Phase, cur.Status.Conditions)
			}
			want := sentUsage(modelRecords(ctx, t, cs, metered))
			if want.Requests < 2 || cur.Status.Usage == nil || *cur.Status.Usage != want {
				t.Errorf("status.usage = %+v, want what the stand-in reported for its %d requests: %+v", cur.Status.Usage, want.Requests, want)
			}
			return ctx
		}).
		Assess("a spent budget ends the Task BudgetExceeded", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, newTask(budgeted, "model-budget", tatarav1.KindImplement, ""))
			records := modelRecords(ctx, t, cs, budgeted)
			want := sentUsage(records)
			ready := meta.FindStatusCondition(cur.Status.Conditions, tatarav1.ConditionReady)
			if cur.Status.Phase != tatarav1.PhaseFailed || ready == nil || ready.Reason != tatarav1.ReasonBudgetExceeded {
				t.Errorf("task %s ended %s with Ready %+v, want Failed with reason %s", budgeted, cur.Status.Phase, ready, tatarav1.ReasonBudgetExceeded)
			}
			if len(records) != 1 || cur.Status.Usage == nil || *cur.Status.Usage != want {
				t.Errorf("the stand-in answered %d requests and status.usage = %+v; want one request, its usage %+v", len(records), cur.Status.Usage, want)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
