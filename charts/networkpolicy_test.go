package charts_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// agentPodLabels are the labels by which both charts select agent pods: two of the labels the
// operator puts on every agent pod (operator/internal/agent.Labels). The e2e suite proves that they
// agree, since agent pods could not reach the operator's REST API otherwise.
var agentPodLabels = map[string]any{"app.kubernetes.io/name": "tatara-agent", "app.kubernetes.io/managed-by": "tatara-operator"}

// monitoringPeer is the default metrics peer of both charts: the pods of the namespace named monitoring.
var monitoringPeer = map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
	"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"monitoring"}}}}}

func networkPolicy(t *testing.T, chart string, vals map[string]any) *unstructured.Unstructured {
	t.Helper()
	r := mustRender(t, chart, vals)
	np := r.find("NetworkPolicy", "")
	if np == nil {
		t.Fatalf("%s renders no NetworkPolicy: %v", chart, r.kinds())
	}
	return np
}

// rules returns spec.<field> (ingress or egress) as plain JSON values.
func rules(t *testing.T, np *unstructured.Unstructured, field string) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(nested(t, np, "spec", field))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOperatorNetworkPolicyAdmitsOnlyAgentsToTheAPI: the REST port only from agent pods of the agent
// namespaces (both conditions in one peer, so a pod must match both) and from the backends'
// namespaces (token reviews), /metrics only from the metrics namespaces, both from the release's
// own release check (TestOperatorNetworkPolicyAdmitsTheReleaseCheck), nothing else; the ports are
// the container's named ports.
func TestOperatorNetworkPolicyAdmitsOnlyAgentsToTheAPI(t *testing.T) {
	vals := map[string]any{"agentNamespaces": map[string]any{"tatara-agents": nil, "team-b": map[string]any{}, "team-a": map[string]any{}},
		"networkPolicy": map[string]any{"apiNamespaces": map[string]any{"memory": map[string]any{}}}}
	r := mustRender(t, "tatara-operator", vals)
	np := r.find("NetworkPolicy", "tatara-operator")
	if np == nil {
		t.Fatalf("no NetworkPolicy tatara-operator in %v", r.kinds())
	}
	dep := r.find("Deployment", "tatara-operator")
	if got, want := nested(t, np, "spec", "podSelector", "matchLabels"), nested(t, dep, "spec", "selector", "matchLabels"); !reflect.DeepEqual(got, want) {
		t.Errorf("podSelector %v, want the Deployment's selector %v", got, want)
	}
	if got := nested(t, np, "spec", "policyTypes"); !reflect.DeepEqual(got, []any{"Ingress"}) {
		t.Errorf("policyTypes %v, want [Ingress]", got)
	}
	var containerPorts []string
	for _, p := range nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["ports"].([]any) {
		containerPorts = append(containerPorts, p.(map[string]any)["name"].(string))
	}
	in := rules(t, np, "ingress")
	if len(in) != 4 {
		t.Fatalf("ingress has %d rules, want 4 (api from agents, api from the backends' namespaces, metrics from monitoring, api and metrics from the release check): %v", len(in), in)
	}
	wantBackends := asJSON(t, []any{map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
		"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"memory", "tatara-system"}}}}}})
	if !reflect.DeepEqual(in[1]["from"], wantBackends) {
		t.Errorf("token review rule from %v, want the release namespace and apiNamespaces %v", in[1]["from"], wantBackends)
	}
	wantAgents := asJSON(t, []map[string]any{{
		"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{
			"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"team-a", "team-b"}}}},
		"podSelector": map[string]any{"matchLabels": agentPodLabels},
	}})
	if !reflect.DeepEqual(in[0]["from"], wantAgents) {
		t.Errorf("api rule from %v, want %v", in[0]["from"], wantAgents)
	}
	if !reflect.DeepEqual(in[2]["from"], asJSON(t, []any{monitoringPeer})) {
		t.Errorf("metrics rule from %v, want the monitoring namespace", in[2]["from"])
	}
	for i, port := range []string{"api", "api", "metrics"} {
		got := asJSON(t, in[i]["ports"])
		if want := asJSON(t, []any{map[string]any{"port": port, "protocol": "TCP"}}); !reflect.DeepEqual(got, want) {
			t.Errorf("rule %d ports %v, want %v", i, got, want)
		}
		if !slices.Contains(containerPorts, port) {
			t.Errorf("rule %d names port %q, which the operator container (ports %v) does not have", i, port, containerPorts)
		}
	}
}

// TestProjectNetworkPolicyConfinesAgentPods: the Project's agent pods take only metrics scrapes;
// in the cluster they reach DNS, the Tatara services and what egressInCluster adds, nothing else;
// with egress.mode open, outside it every address but the private ranges and the metadata
// addresses, each in its family's block.
func TestProjectNetworkPolicyConfinesAgentPods(t *testing.T) {
	np := networkPolicy(t, "tatara-project", map[string]any{"name": "alpha", "egress": map[string]any{"mode": "open"},
		"networkPolicy": map[string]any{
			"egressDenied":        map[string]any{"alibabaMetadata": nil, "corp": "203.0.113.0/24"},
			"egressPrivateRanges": map[string]any{"rfc1918c": nil},
			"egressInCluster": map[string]any{"git": map[string]any{"namespace": "git", "podLabels": map[string]any{"app": "gitea"},
				"ports": map[string]any{"3000/TCP": map[string]any{}}}},
		}})
	wantSelector := map[string]any{"tatara.dev/project": "alpha"}
	for k, v := range agentPodLabels {
		wantSelector[k] = v
	}
	if got := nested(t, np, "spec", "podSelector", "matchLabels"); !reflect.DeepEqual(got, wantSelector) {
		t.Errorf("podSelector %v, want %v (this Project's agent pods only)", got, wantSelector)
	}
	if got := nested(t, np, "spec", "policyTypes"); !reflect.DeepEqual(got, []any{"Ingress", "Egress"}) {
		t.Errorf("policyTypes %v, want [Ingress Egress]", got)
	}
	in := rules(t, np, "ingress")
	if len(in) != 1 || !reflect.DeepEqual(in[0]["from"], asJSON(t, []any{monitoringPeer})) {
		t.Fatalf("ingress %v, want one rule from the monitoring namespace", in)
	}
	var ports []float64
	for _, p := range in[0]["ports"].([]any) {
		ports = append(ports, p.(map[string]any)["port"].(float64))
	}
	if !reflect.DeepEqual(ports, []float64{9090, 9091, 9092, 9093}) {
		t.Errorf("metrics ports %v, want the wrapper's, the cli's, the git gateway's and the model gateway's (9090, 9091, 9092, 9093)", ports)
	}
	ns := func(name string) map[string]any {
		return map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": name}}
	}
	port := func(p int, proto string) map[string]any { return map[string]any{"port": p, "protocol": proto} }
	want := asJSON(t, []map[string]any{
		{"to": []any{map[string]any{"namespaceSelector": ns("kube-system"), "podSelector": map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-dns"}}}},
			"ports": []any{port(53, "TCP"), port(53, "UDP")}},
		{"to": []any{map[string]any{"namespaceSelector": ns("git"), "podSelector": map[string]any{"matchLabels": map[string]any{"app": "gitea"}}}},
			"ports": []any{port(3000, "TCP")}},
		{"to": []any{map[string]any{"namespaceSelector": ns("tatara-system")}}, "ports": []any{port(8080, "TCP"), port(8082, "TCP")}},
		{"to": []any{
			map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0", "except": []any{"10.0.0.0/8", "100.64.0.0/10", "168.63.129.16/32",
				"169.254.0.0/16", "169.254.169.252/32", "169.254.169.254/32", "169.254.170.2/32", "169.254.170.23/32", "172.16.0.0/12", "203.0.113.0/24"}}},
			map[string]any{"ipBlock": map[string]any{"cidr": "::/0", "except": []any{"fc00::/7", "fd00:ec2::23/128", "fd00:ec2::254/128", "fe80::/10"}}},
		}},
	})
	if got := rules(t, np, "egress"); !reflect.DeepEqual(asJSON(t, got), want) {
		t.Errorf("egress %v\nwant %v", got, want)
	}
}

// TestProjectEgressGoesOnlyThroughItsProxy: by default (egress.mode proxy) the agent pods' one
// way out of the cluster is their own Project's egress proxy pods, on its port, and no address
// block at all; the proxy's own policy admits only those agent pods to that port and the
// monitoring namespace to its metrics; the Project names the proxy's Service, and open mode
// renders neither the proxy nor its policy.
func TestProjectEgressGoesOnlyThroughItsProxy(t *testing.T) {
	r := mustRender(t, "tatara-project", map[string]any{"name": "alpha", "egress": map[string]any{"allow": map[string]any{
		"pkgs": "pkgs.example.com", "sub": "*.example.org:8443", "off": nil}}})
	proxySelector := map[string]any{"app.kubernetes.io/instance": "tatara-project", "app.kubernetes.io/name": "tatara-egress-proxy", "tatara.dev/project": "alpha"}
	agents := r.find("NetworkPolicy", "alpha-agents")
	if agents == nil {
		t.Fatalf("no NetworkPolicy alpha-agents: %v", r.kinds())
	}
	egress := rules(t, agents, "egress")
	last := egress[len(egress)-1]
	wantLast := asJSON(t, map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": proxySelector}}},
		"ports": []any{map[string]any{"port": 3128, "protocol": "TCP"}}})
	if !reflect.DeepEqual(asJSON(t, last), wantLast) {
		t.Errorf("the agents' last egress rule %v, want only the proxy pods on 3128 %v", last, wantLast)
	}
	for _, rule := range egress {
		if strings.Contains(fmt.Sprint(rule), "ipBlock") {
			t.Errorf("an agents' egress rule names addresses: %v", rule)
		}
	}

	proxyNP := r.find("NetworkPolicy", "alpha-egress-proxy")
	if proxyNP == nil {
		t.Fatalf("no NetworkPolicy alpha-egress-proxy: %v", r.kinds())
	}
	if got := nested(t, proxyNP, "spec", "podSelector", "matchLabels"); !reflect.DeepEqual(got, proxySelector) {
		t.Errorf("the proxy's policy selects %v, want %v", got, proxySelector)
	}
	wantAgents := map[string]any{"tatara.dev/project": "alpha"}
	for k, v := range agentPodLabels {
		wantAgents[k] = v
	}
	wantIn := asJSON(t, []map[string]any{
		{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": wantAgents}}}, "ports": []any{map[string]any{"port": 3128, "protocol": "TCP"}}},
		{"from": []any{monitoringPeer}, "ports": []any{map[string]any{"port": 8080, "protocol": "TCP"}}},
	})
	if got := rules(t, proxyNP, "ingress"); !reflect.DeepEqual(asJSON(t, got), wantIn) {
		t.Errorf("the proxy's ingress %v\nwant %v", got, wantIn)
	}

	project := r.find("Project", "alpha")
	if project == nil {
		t.Fatalf("no Project: %v", r.kinds())
	}
	wantEgress := map[string]any{"mode": "Proxy", "proxyURL": "http://alpha-egress-proxy.tatara-agents.svc:3128",
		"allow": []any{"*.example.org:8443", "pkgs.example.com"}}
	if got := nested(t, project, "spec", "egress"); !reflect.DeepEqual(asJSON(t, got), asJSON(t, wantEgress)) {
		t.Errorf("spec.egress %v, want %v", got, wantEgress)
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget"} {
		if r.find(kind, "alpha-egress-proxy") == nil {
			t.Errorf("no %s alpha-egress-proxy: %v", kind, r.kinds())
		}
	}

	open := mustRender(t, "tatara-project", map[string]any{"name": "alpha", "egress": map[string]any{"mode": "open"}})
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "Role"} {
		if o := open.find(kind, "alpha-egress-proxy"); o != nil {
			t.Errorf("egress.mode open still renders %s %s", kind, o.GetName())
		}
	}
	if got := nested(t, open.find("Project", "alpha"), "spec", "egress"); !reflect.DeepEqual(asJSON(t, got), asJSON(t, map[string]any{"mode": "Open"})) {
		t.Errorf("open: spec.egress %v, want mode Open and nothing else", got)
	}
}

// TestNetworkPoliciesFollowTheirSwitch: on by default, and off renders none.
func TestNetworkPoliciesFollowTheirSwitch(t *testing.T) {
	for _, chart := range []string{"tatara-operator", "tatara-project"} {
		t.Run(chart, func(t *testing.T) {
			networkPolicy(t, chart, nil)
			off := mustRender(t, chart, map[string]any{"networkPolicy": map[string]any{"enabled": false}})
			if np := off.find("NetworkPolicy", ""); np != nil {
				t.Errorf("networkPolicy.enabled=false still renders %s", np.GetName())
			}
		})
	}
}
