package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func withEgress(e *tatarav1.ProjectEgress) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) { p.Spec.Egress = e }
}

// TestProjectEgress: the API server refuses an egress allow-list entry that is no host pattern
// (an address, a URL, a bare wildcard, Unicode), a Proxy mode without a proxy, and proxy
// variables in extraEnvs of a proxied Project; the OpenEgress condition says which way a
// Project's agents go out, and a Task's pod gets the proxy.
func TestProjectEgress(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	ctx := context.Background()
	const proxy = "http://egress-proxy.team.svc:3128"

	for name, c := range map[string]struct {
		egress *tatarav1.ProjectEgress
		extra  []corev1.EnvVar
		want   string
	}{
		"address":       {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy, Allow: []string{"10.0.0.1"}}, want: "spec.egress.allow[0]"},
		"url":           {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy, Allow: []string{"https://pkgs.example.com"}}, want: "spec.egress.allow[0]"},
		"bare wildcard": {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy, Allow: []string{"*"}}, want: "spec.egress.allow[0]"},
		"inner star":    {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy, Allow: []string{"pkgs.*.com"}}, want: "spec.egress.allow[0]"},
		"unicode":       {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy, Allow: []string{"bücher.example"}}, want: "spec.egress.allow[0]"},
		"no proxy url":  {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy}, want: "proxyURL is required when mode is Proxy"},
		"proxy env": {egress: &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy},
			extra: []corev1.EnvVar{{Name: "no_proxy", Value: "*"}}, want: "may not set the proxy variables"},
	} {
		p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "refused-" + strings.ReplaceAll(name, " ", "-"), Namespace: ns},
			Spec: tatarav1.ProjectSpec{Egress: c.egress, Agent: tatarav1.ProjectAgent{ExtraEnvs: c.extra}}}
		if err := k8s.Create(ctx, p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: create = %v, want refused naming %q", name, err, c.want)
		}
	}

	newProject(t, ns, "proxied", withEgress(&tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: proxy,
		Allow: []string{"pkgs.example.com", "*.example.org:8443", "xn--bcher-kva.example."}}))
	c := projectCondition(t, ns, "proxied", tatarav1.ProjectConditionOpenEgress, metav1.ConditionFalse, tatarav1.ReasonEgressProxy)
	if !strings.Contains(c.Message, proxy) {
		t.Errorf("OpenEgress message %q does not name the proxy", c.Message)
	}
	newTask(t, ns, "through-the-proxy", "proxied", tatarav1.KindImplement)
	pod := waitPod(t, ns, "through-the-proxy")
	var got string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "HTTPS_PROXY" {
			got = e.Value
		}
	}
	if got != proxy {
		t.Errorf("the agent's HTTPS_PROXY = %q, want %q", got, proxy)
	}

	newProject(t, ns, "open", withEgress(&tatarav1.ProjectEgress{Mode: tatarav1.EgressOpen}))
	projectCondition(t, ns, "open", tatarav1.ProjectConditionOpenEgress, metav1.ConditionTrue, tatarav1.ReasonEgressOpen)
	newProject(t, ns, "unset")
	projectCondition(t, ns, "unset", tatarav1.ProjectConditionOpenEgress, metav1.ConditionUnknown, tatarav1.ReasonEgressNotConfigured)
}
