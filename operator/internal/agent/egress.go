package agent

import (
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// inClusterNoProxy is what stays in the cluster and never goes through the proxy: loopback (the
// cli, the git and model gateways) and Service names, which the NetworkPolicy admits directly.
var inClusterNoProxy = []string{"localhost", "127.0.0.1", "::1", ".svc", ".cluster.local"}

// egressProxyEnv is the proxy env of every container of a Project whose spec.egress.mode is
// Proxy; nil otherwise. It is appended after the extras, which may not set these variables then
// (the Project CRD refuses them), so the operator's value is the one a program reads.
func egressProxyEnv(project *tatarav1.Project, cfg Config) []corev1.EnvVar {
	e := project.Spec.Egress
	if e == nil || e.Mode != tatarav1.EgressProxy || e.ProxyURL == "" {
		return nil
	}
	noProxy := strings.Join(NoProxy(cfg), ",")
	env := make([]corev1.EnvVar, 0, len(agentpod.ProxyEnv))
	for _, name := range agentpod.ProxyEnv {
		v := e.ProxyURL
		if strings.EqualFold(name, "NO_PROXY") {
			v = noProxy
		}
		env = append(env, corev1.EnvVar{Name: name, Value: v})
	}
	return env
}

// NoProxy is the NO_PROXY list: loopback, Service names, and the hosts of the backends the cli
// calls, in case one is named outside .svc and .cluster.local.
func NoProxy(cfg Config) []string {
	hosts := slices.Clone(inClusterNoProxy)
	for _, raw := range []string{cfg.OperatorURL, cfg.MemoryURL, cfg.ChatURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" || noProxyCovers(hosts, u.Hostname()) {
			continue
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// noProxyCovers reports whether a NO_PROXY list already names host, as itself or by a ".suffix".
func noProxyCovers(list []string, host string) bool {
	return slices.ContainsFunc(list, func(e string) bool {
		return e == host || (strings.HasPrefix(e, ".") && strings.HasSuffix(host, e))
	})
}

// withEgressProxy gives every container of the pod the Project's proxy env.
func withEgressProxy(spec *corev1.PodSpec, env []corev1.EnvVar) {
	if len(env) == 0 {
		return
	}
	for i := range spec.InitContainers {
		spec.InitContainers[i].Env = append(spec.InitContainers[i].Env, env...)
	}
	for i := range spec.Containers {
		spec.Containers[i].Env = append(spec.Containers[i].Env, env...)
	}
}
