//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// squatterAddrs are the addresses an agent would take to serve its own MCP and metrics in the
// cli's place: the cli's own, and the wildcard forms that would also catch its traffic.
var squatterAddrs = []string{
	agentpod.MCPListen,
	"0.0.0.0" + agentpod.MCPListen[strings.LastIndex(agentpod.MCPListen, ":"):],
	fmt.Sprintf("0.0.0.0:%d", agentpod.CLIMetricsPort),
	fmt.Sprintf("127.0.0.1:%d", agentpod.CLIMetricsPort),
}

// squatProbe tries each address once, as an attacker would (SO_REUSEADDR and SO_REUSEPORT set),
// and prints "<addr>: bound" or "<addr>: refused: <errno text>".
func squatProbe() string {
	return `for a in ` + strings.Join(squatterAddrs, " ") + `; do perl -MIO::Socket::INET -e '` +
		`my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], Listen => 1, ReuseAddr => 1, ReusePort => 1); ` +
		`print "squat $ARGV[0]: ", ($s ? "bound" : "refused: $!"), "\n"' "$a"; done`
}

// squatLoop keeps trying to take the cli's MCP and metrics ports for up to 100 s (inside the
// agent's Bash tool timeout), and serves a fake MCP answer on whatever it takes.
const squatLoop = `perl -MIO::Socket::INET -MIO::Select -e '` +
	`my @want = @ARGV; my (%got, $sel) = (); $sel = IO::Select->new; my $end = time + 100; ` +
	`while (time < $end) { for my $a (@want) { next if $got{$a}; ` +
	`my $s = IO::Socket::INET->new(LocalAddr => $a, Listen => 5, ReuseAddr => 1, ReusePort => 1) or next; ` +
	`$got{$a} = 1; $sel->add($s); print "squatted $a\n"; } ` +
	`for my $s ($sel->can_read(0.01)) { my $c = $s->accept or next; ` +
	`print $c "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"; close $c; } } ' `

// TestCLIPortSquatter: the agent tries to take its cli's ports. While the cli runs, every bind is
// refused. When the cli stops anyway (stopped here through the node's container runtime, as an
// OOM kill or a crash would), the agent races to take its ports; whoever wins, the sidecar's
// restart ends the Task Failed (SidecarRestarted) and the operator deletes the pod, so nothing the
// agent serves there is ever trusted.
func TestCLIPortSquatter(t *testing.T) {
	sharedFeature(t)
	const name = "squatter"
	var task *tatarav1.Task
	f := features.New("a cli port squatter").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			task = newTask(name, kindProject, tatarav1.KindBrainstorm, modelScript(name,
				bashStep(squatProbe()),
				bashStep(squatLoop+strings.Join(squatterAddrs[:3], " ")),
				"say done"))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("binds are refused while the cli runs; a cli restart fails the Task and deletes its pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			// The probe's output reaches the model with the request that starts the squat loop.
			var probe string
			err := wait.For(func(ctx context.Context) (bool, error) {
				for _, rec := range modelRecords(ctx, t, cs, name) {
					for _, res := range rec.ToolResults {
						if strings.Contains(res, "squat ") {
							probe = res
						}
					}
				}
				return probe != "", nil
			}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
			if err != nil {
				t.Fatalf("the agent's bind probe never reported: %v", err)
			}
			for _, addr := range squatterAddrs {
				if !strings.Contains(probe, "squat "+addr+": refused: Address already in use") {
					t.Errorf("binding %s while the cli runs was not refused as in use:\n%s", addr, probe)
				}
			}

			var cur tatarav1.Task
			if err := r.Get(ctx, name, agentNamespace, &cur); err != nil {
				t.Fatal(err)
			}
			var pod corev1.Pod
			if err := r.Get(ctx, cur.Status.PodName, agentNamespace, &pod); err != nil {
				t.Fatalf("agent pod %q of the running Task: %v", cur.Status.PodName, err)
			}
			stopContainer(ctx, t, pod, agentpod.CLIContainer)

			end := terminalTask(ctx, t, r, task)
			ready := meta.FindStatusCondition(end.Status.Conditions, tatarav1.ConditionReady)
			if end.Status.Phase != tatarav1.PhaseFailed || ready == nil || ready.Reason != tatarav1.ReasonSidecarRestarted {
				t.Errorf("after its cli restarted the Task ended %s with Ready %+v, want Failed/%s",
					end.Status.Phase, ready, tatarav1.ReasonSidecarRestarted)
			}
			err = wait.For(func(ctx context.Context) (bool, error) {
				var p corev1.Pod
				err := r.Get(ctx, pod.Name, pod.Namespace, &p)
				return apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID), nil
			}, wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(time.Second))
			if err != nil {
				t.Errorf("the pod whose cli restarted was not deleted: %v", err)
			}
			logf("  cli port squatter: %s", strings.Join(strings.Fields(strings.ReplaceAll(probe, "\n", "; ")), " "))
			return ctx
		}).
		Teardown(deleting(&task)).Feature()
	testenv.Test(t, f)
}

// stopContainer stops one container of pod through the container runtime of the kind node it
// runs on, as an OOM kill would: the kubelet then restarts it.
func stopContainer(ctx context.Context, t *testing.T, pod corev1.Pod, container string) {
	t.Helper()
	crictl := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", pod.Spec.NodeName, "crictl"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("crictl %s on node %s: %v\n%s", strings.Join(args, " "), pod.Spec.NodeName, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id := crictl("ps", "--quiet", "--name", "^"+container+"$", "--label", "io.kubernetes.pod.uid="+string(pod.UID))
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("container %s of pod %s on node %s: crictl found %q, want one id", container, pod.Name, pod.Spec.NodeName, id)
	}
	crictl("stop", "--timeout", "0", id)
}
