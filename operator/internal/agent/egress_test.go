package agent

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// proxyProject is a Project with a pushable repo, a model gateway and the given egress.
func proxyProject(egress *tatarav1.ProjectEgress) *tatarav1.Project {
	p := modelProject()
	p.Spec.Repos = []tatarav1.ProjectRepo{{
		Name: "operator", URL: "https://git.example.test/operator.git",
		Push: &tatarav1.RepoPush{SecretName: "push"},
	}}
	p.Spec.Egress = egress
	return p
}

// TestEveryContainerUsesTheEgressProxy: with spec.egress.mode Proxy every container of a Task's
// pod and of a pool pod (the clone, the agent, the cli, both gateways) gets the proxy in both
// cases of each variable, and NO_PROXY keeps loopback, Service names and the backends direct; the
// operator's values come after the extras. Open and unset egress give no proxy variable at all.
func TestEveryContainerUsesTheEgressProxy(t *testing.T) {
	const proxy = "http://p1-egress-proxy.team-a.svc:3128"
	proxied := proxyProject(&tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy})
	for _, pod := range []*corev1.Pod{
		BuildPod(testTask(tatarav1.KindImplement), proxied, testConfig()),
		BuildPoolPod(proxied, implementPool(), testConfig()),
	} {
		containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
		names := map[string]bool{}
		for _, c := range containers {
			names[c.Name] = true
			for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
				if v, i := envValue(c.Env, name); v != proxy || i < len(c.Env)-len(agentpod.ProxyEnv) {
					t.Errorf("pod %s container %s: %s = %q at %d of %d, want %q among the last", pod.Name, c.Name, name, v, i, len(c.Env), proxy)
				}
			}
			for _, name := range []string{"NO_PROXY", "no_proxy"} {
				if v, _ := envValue(c.Env, name); v != "localhost,127.0.0.1,::1,.svc,.cluster.local" {
					t.Errorf("pod %s container %s: %s = %q", pod.Name, c.Name, name, v)
				}
			}
		}
		for _, want := range []string{WorkspaceInitContainer, CLIContainer, GitGatewayContainer, ModelGatewayContainer, WrapperContainer} {
			if !names[want] {
				t.Errorf("pod %s has no container %s to check: %v", pod.Name, want, names)
			}
		}
	}
	for _, egress := range []*tatarav1.ProjectEgress{nil, {Mode: tatarav1.EgressOpen}} {
		pod := BuildPod(testTask(tatarav1.KindImplement), proxyProject(egress), testConfig())
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			for _, e := range c.Env {
				if slices.Contains(agentpod.ProxyEnv, e.Name) {
					t.Errorf("egress %+v: container %s has %s", egress, c.Name, e.Name)
				}
			}
		}
	}
}

// TestNoProxyNamesBackendsOutsideTheServiceDomain: a backend named by an address or a name outside
// .svc and .cluster.local is added, once.
func TestNoProxyNamesBackendsOutsideTheServiceDomain(t *testing.T) {
	cfg := testConfig()
	cfg.MemoryURL = "http://10.0.0.7:8080"
	cfg.ChatURL = "https://chat.internal.example:8443/api"
	cfg.OperatorURL = "http://localhost:8082"
	got := NoProxy(cfg)
	want := []string{"localhost", "127.0.0.1", "::1", ".svc", ".cluster.local", "10.0.0.7", "chat.internal.example"}
	if !slices.Equal(got, want) {
		t.Errorf("NoProxy = %v, want %v", got, want)
	}
}
