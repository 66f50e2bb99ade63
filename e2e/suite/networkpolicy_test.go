//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"tatara.dev/cli/pkg/agentpod"
)

// agentImageName is the repository suffix of the Claude Code agent image in E2E_IMAGES: it has
// bash and coreutils, which the network probe needs.
const agentImageName = "tatara-agent-claude"

// probeTimeoutExit is timeout(1)'s exit status when the command ran out of time: a TCP connect
// that never completes, which is how a NetworkPolicy drop looks from the client (a refused
// connection exits 1 instead).
const probeTimeoutExit = "124"

// netTarget is one address the network probe tries to open a TCP connection to.
type netTarget struct{ name, host, port string }

var (
	operatorAPI     = netTarget{"operator-api", "tatara-operator." + systemNamespace + ".svc", "8082"}
	operatorMetrics = netTarget{"operator-metrics", "tatara-operator." + systemNamespace + ".svc", "8080"}
	gitServer       = netTarget{"git-server", fmt.Sprintf("%s.%s.svc", gitServerName, gitServerNamespace), fmt.Sprint(gitServerPort)}
	kubeAPI         = netTarget{"kube-api", "kubernetes.default.svc", "443"}
	prometheusPod   = netTarget{"prometheus", "prometheus-operated.monitoring.svc", "9090"}
)

// assertAgentEgressConfined: an agent pod of the kind Project reaches what the Project's
// NetworkPolicy names (the operator's REST API, the e2e git server and model stand-in) and no other
// pod of the cluster: another namespace's pod (Prometheus) and another Project's agent pod (a
// listener with that Project's agent labels, on the wrapper's metrics port) time out, while a pod
// outside the agent namespace reaches that listener, so the listener itself works. The kube API is
// probed and logged, not asserted: its endpoint is the node's own address, which kind's enforcer
// (kube-network-policies) never sees (it filters forwarded pod traffic only), so kind cannot prove
// the policy's ipBlock rule for it.
func assertAgentEgressConfined(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	if enforced, why := clusterEnforcesNetworkPolicies(ctx, t, cfg); !enforced {
		t.Fatalf("NetworkPolicies cannot be proven: %s", why)
	}
	labels := map[string]string{"app.kubernetes.io/name": "tatara-agent", "app.kubernetes.io/managed-by": "tatara-operator", "tatara.dev/project": kindProject}
	otherLabels := map[string]string{"app.kubernetes.io/name": "tatara-agent", "app.kubernetes.io/managed-by": "tatara-operator", "tatara.dev/project": "another-project"}
	otherProject := netTarget{"other-project-pod", listenerPod(ctx, t, cfg, "netprobe-other-project", agentNamespace, otherLabels, agentpod.WrapperMetricsPort), fmt.Sprint(agentpod.WrapperMetricsPort)}
	if control := networkProbe(ctx, t, cfg, "netprobe-listener-control", modelNamespace, map[string]string{"app.kubernetes.io/name": "netprobe"}, otherProject); control[otherProject.name] != "open" {
		t.Fatalf("the other Project's listener is not reachable from outside the agent namespace either (%v): the probe below would prove nothing", control)
	}
	got := networkProbe(ctx, t, cfg, "netprobe-agent-egress", agentNamespace, labels, operatorAPI, gitServer, kubeAPI, prometheusPod, otherProject)
	blocked := "blocked(" + probeTimeoutExit + ")"
	want := map[string]string{operatorAPI.name: "open", gitServer.name: "open", prometheusPod.name: blocked, otherProject.name: blocked}
	for target, w := range want {
		if got[target] != w {
			t.Errorf("agent pod of project %s: %s is %q, want %q (all: %v)", kindProject, target, got[target], w, got)
		}
	}
	logf("  network probe agent egress: %v", got)
}

// suiteImage is the reference in E2E_IMAGES whose repository ends in /name.
func suiteImage(t *testing.T, name string) string {
	t.Helper()
	images := strings.Fields(os.Getenv("E2E_IMAGES"))
	i := slices.IndexFunc(images, func(img string) bool { return strings.HasSuffix(imageRepository(img), "/"+name) })
	if i < 0 {
		t.Fatalf("E2E_IMAGES has no %s image: %v", name, images)
	}
	return images[i]
}

// listenerPod runs a pod (restricted PSS, the agent image) in namespace with labels that accepts TCP
// connections on port, and returns its IP once it is Ready.
func listenerPod(ctx context.Context, t *testing.T, cfg *envconf.Config, name, namespace string, labels map[string]string, port int) string {
	t.Helper()
	r, cs := clients(t, cfg)
	listen := fmt.Sprintf(`my $s = IO::Socket::INET->new(LocalPort => %d, Listen => 16, ReuseAddr => 1) or die "listen: $!"; while (my $c = $s->accept) { close $c }`, port)
	pod := restrictedPod(t, name, namespace, labels, "/usr/bin/perl", "-MIO::Socket::INET", "-e", listen)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}, PeriodSeconds: 1}
	if err := r.Create(ctx, pod); err != nil {
		t.Fatalf("failed to create the listener pod %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), pod) })
	if err := wait.For(conditions.New(r).PodReady(pod), wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second)); err != nil {
		t.Fatalf("listener pod %s/%s never became Ready: %v\n%s", namespace, name, err, podLogs(ctx, cs, pod, "probe"))
	}
	if err := r.Get(ctx, name, namespace, pod); err != nil || pod.Status.PodIP == "" {
		t.Fatalf("listener pod %s/%s has no IP: %v", namespace, name, err)
	}
	return pod.Status.PodIP
}

// restrictedPod is a pod of one container, "probe", that runs command in the agent image under the
// restricted Pod Security Standard, as agent pods do.
func restrictedPod(t *testing.T, name, namespace string, labels map[string]string, command ...string) *corev1.Pod {
	t.Helper()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				RunAsGroup: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: suiteImage(t, agentImageName), ImagePullPolicy: corev1.PullNever,
				Command: command,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// networkProbe runs a pod (restricted PSS, the agent image) in namespace with labels that tries a
// TCP connection to each target, bounded by 5 s, and returns each target's outcome: "open", or
// "blocked(<exit status>)".
func networkProbe(ctx context.Context, t *testing.T, cfg *envconf.Config, name, namespace string, labels map[string]string, targets ...netTarget) map[string]string {
	t.Helper()
	r, cs := clients(t, cfg)
	var script strings.Builder
	// The name is resolved first, with retries (the first DNS answer through the enforcer's queue
	// can be lost), so a timeout below is the TCP connection being dropped, not a slow lookup.
	script.WriteString(`probe() { ip=; for i in 1 2 3 4 5; do ip=$(getent ahostsv4 "$2" | awk '{print $1; exit}'); [ -n "$ip" ] && break; sleep 1; done; ` +
		`if [ -z "$ip" ]; then echo "$1=unresolved"; return; fi; ` +
		`if timeout 5 bash -c "exec 3<>/dev/tcp/$ip/$3" 2>/dev/null; then echo "$1=open"; else echo "$1=blocked($?)"; fi; }; `)
	for _, tg := range targets {
		fmt.Fprintf(&script, "probe %s %s %s; ", tg.name, tg.host, tg.port)
	}
	pod := restrictedPod(t, name, namespace, labels, "/bin/bash", "-c", script.String())
	if err := r.Create(ctx, pod); err != nil {
		t.Fatalf("failed to create the probe pod %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), pod) })
	if err := wait.For(conditions.New(r).PodPhaseMatch(pod, corev1.PodSucceeded),
		wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second)); err != nil {
		t.Fatalf("probe pod %s/%s did not succeed: %v\n%s", namespace, name, err, podLogs(ctx, cs, pod, "probe"))
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(podLogs(ctx, cs, pod, "probe")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// assertNotAgentsReachOperator: the operator's NetworkPolicy admits only agent pods, by label and
// namespace. A pod in the agent namespace without the agent labels, and a pod labelled as an agent
// in a namespace that is not an agent namespace, both time out on the REST API and on /metrics
// (dropped, not refused), while the same pods reach the git server, so DNS, the probe and the pod
// network work. That agent pods do reach the REST API is proven by every Task whose cli calls it.
func assertNotAgentsReachOperator(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	// A cluster that enforces nothing would let every assertion below pass or fail for the
	// wrong reason: it fails the suite instead of skipping.
	if enforced, why := clusterEnforcesNetworkPolicies(ctx, t, cfg); !enforced {
		t.Fatalf("NetworkPolicies cannot be proven: %s", why)
	}
	agentLabels := map[string]string{"app.kubernetes.io/name": "tatara-agent", "app.kubernetes.io/managed-by": "tatara-operator"}
	for _, tc := range []struct {
		name, namespace string
		labels          map[string]string
	}{
		{"unlabelled-in-agent-ns", agentNamespace, map[string]string{"app.kubernetes.io/name": "netprobe"}},
		{"agent-labels-elsewhere", modelNamespace, agentLabels},
	} {
		got := networkProbe(ctx, t, cfg, "netprobe-"+tc.name, tc.namespace, tc.labels, operatorAPI, operatorMetrics, gitServer)
		want := map[string]string{
			operatorAPI.name:     "blocked(" + probeTimeoutExit + ")",
			operatorMetrics.name: "blocked(" + probeTimeoutExit + ")",
			gitServer.name:       "open",
		}
		for target, w := range want {
			if got[target] != w {
				t.Errorf("%s (namespace %s, labels %v): %s is %q, want %q (all: %v)", tc.name, tc.namespace, tc.labels, target, got[target], w, got)
			}
		}
		logf("  network probe %s: %v", tc.name, got)
	}
}

// clusterEnforcesNetworkPolicies asks the cluster itself: a deny-all-ingress policy on the git
// server must make a probe to it time out. If the connection still opens, no enforcer runs (a
// CNI without NetworkPolicy support, or a node kernel without the nftables queue expression that
// kube-network-policies needs), and nothing the charts' policies say can be proven here. The
// canary policy is deleted before the real probes, which expect the git server open again.
func clusterEnforcesNetworkPolicies(ctx context.Context, t *testing.T, cfg *envconf.Config) (bool, string) {
	t.Helper()
	r, _ := clients(t, cfg)
	canary := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "netpol-canary", Namespace: gitServerNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": gitServerName}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if err := r.Create(ctx, canary); err != nil {
		t.Fatalf("failed to create the canary NetworkPolicy: %v", err)
	}
	got := networkProbe(ctx, t, cfg, "netprobe-canary", agentNamespace, map[string]string{"app.kubernetes.io/name": "netprobe"}, gitServer)
	if err := r.Delete(ctx, canary); err != nil {
		t.Fatalf("failed to delete the canary NetworkPolicy: %v", err)
	}
	logf("  network probe canary (git server behind deny-all ingress): %v", got)
	switch got[gitServer.name] {
	case "blocked(" + probeTimeoutExit + ")":
		return true, ""
	case "open":
		return false, "this cluster does not enforce NetworkPolicies: a deny-all-ingress policy left the git server reachable " +
			"(the local node image runs kube-network-policies; on a kernel without the nftables queue expression its " +
			"entrypoint diverts pod connections through iptables-legacy: see the node's tatara-entrypoint lines in " +
			"`docker logs <node>` and kube-network-policies' logs in kube-system)"
	default:
		t.Fatalf("canary probe of the git server: %q, want open or blocked(%s)", got[gitServer.name], probeTimeoutExit)
		return false, ""
	}
}
