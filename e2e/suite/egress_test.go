//go:build e2e

package suite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestEgressThroughTheProxy: the kind Project runs with the production default, egress through
// its egress proxy, whose allow-list names allowedHost (helmfile's kind environment). The real
// agent, in a Task of that Project, tries the host outside the cluster four ways with curl, which
// reads the proxy variables the operator gave the pod:
//   - https://allowedHost and http://allowedHost through the proxy: both arrive (a CONNECT tunnel
//     checked by name, and a forwarded request);
//   - https://blockedHost: the proxy refuses the CONNECT (403), the host never sees it, and the
//     Task carries an EgressBlocked Event "blocked: blockedHost:443";
//   - the host's address through the proxy: refused (an address is never on an allow-list);
//   - the host's address directly, skipping the proxy: the NetworkPolicy drops it (a timeout);
//
// and the proxy's metrics, scraped by Prometheus, count the allowed and the denied requests.
func TestEgressThroughTheProxy(t *testing.T) {
	sharedFeature(t)
	const name = "egress"
	task := newTask(name, kindProject, tatarav1.KindImplement, modelScript(name,
		bashStep(fmt.Sprintf(`curl -sk -o /dev/null -w 'allowed-https: %%{http_code}\n' https://%[1]s/via-proxy-https;`+
			` curl -s -o /dev/null -w 'allowed-http: %%{http_code}\n' http://%[1]s/via-proxy-http;`+
			` curl -sk -o /dev/null -w 'blocked-connect: %%{http_connect}\n' https://%[2]s/blocked; echo "blocked-exit: $?";`+
			` curl -sk -o /dev/null -w 'address-connect: %%{http_connect}\n' https://%[3]s/address; echo "address-exit: $?";`+
			` curl -s --noproxy '*' -m 5 -o /dev/null http://%[3]s/direct; echo "direct-exit: $?"`,
			allowedHost, blockedHost, outsideIP)),
		"say done"))
	f := features.New("egress through the Project's proxy").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("only the allowed host is reached, and every refusal is on the Task", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, task)
			var results strings.Builder
			for _, rec := range modelRecords(ctx, t, cs, name) {
				for _, res := range rec.ToolResults {
					results.WriteString(res + "\n")
				}
			}
			out := results.String()
			for _, want := range []string{
				"allowed-https: 200", "allowed-http: 200",
				"blocked-connect: 403", "blocked-exit: 56",
				"address-connect: 403", "address-exit: 56",
				// curl's "operation timed out": the policy drops the packets, nothing answers.
				"direct-exit: 28",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the agent's curl probe lacks %q:\n%s", want, out)
				}
			}
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("task %s ended %s (%+v), want Succeeded", name, cur.Status.Phase, cur.Status.Conditions)
			}

			seen, err := outsideRequests(ctx)
			if err != nil {
				t.Fatal(err)
			}
			paths := map[string]bool{}
			for _, s := range seen {
				paths[s.Scheme+" "+s.Host+s.Path] = true
			}
			for _, want := range []string{"https " + allowedHost + "/via-proxy-https", "http " + allowedHost + "/via-proxy-http"} {
				if !paths[want] {
					t.Errorf("the outside host never saw %q: %+v", want, seen)
				}
			}
			for _, s := range seen {
				if s.Path == "/blocked" || s.Path == "/address" || s.Path == "/direct" {
					t.Errorf("the outside host answered a request that should have been refused: %+v", s)
				}
			}

			for _, want := range []string{"blocked: " + blockedHost + ":443", "blocked: " + outsideIP + ":443"} {
				waitTaskEvent(ctx, t, cs, name, "EgressBlocked", want)
			}

			for decision, min := range map[string]float64{"allowed": 2, "denied": 2} {
				expr := fmt.Sprintf(`sum(tatara_egress_proxy_requests_total{project=%q,decision=%q})`, kindProject, decision)
				waitProm(ctx, t, cs, "the egress proxy's "+decision+" requests", expr, func(s []promSample) bool {
					return len(s) == 1 && s[0].Value >= min
				})
			}
			return ctx
		}).
		Teardown(deleting(&task)).
		Feature()
	testenv.Test(t, f)
}

// waitTaskEvent waits for an Event on the Task with reason and a message containing note.
func waitTaskEvent(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, task, reason, note string) {
	t.Helper()
	var last []string
	err := wait.For(func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events(agentNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + task})
		if err != nil {
			return false, nil
		}
		last = last[:0]
		for _, e := range evs.Items {
			last = append(last, e.Reason+": "+e.Message)
			if e.Reason == reason && e.InvolvedObject.Kind == "Task" && strings.Contains(e.Message, note) {
				return true, nil
			}
		}
		return false, nil
	}, wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(2*time.Second))
	if err != nil {
		t.Errorf("task %s never got a %s Event with %q; its Events: %v", task, reason, note, last)
	}
}
