package charts_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestOperatorRequestsHaveAPriorityLevelOfTheirOwn applies the operator chart's FlowSchema and
// PriorityLevelConfiguration to the real API server and asks it how it classifies requests (its
// X-Kubernetes-PF-* answer headers): the operator's ServiceAccount lands in the chart's level,
// fair-queued by namespace; another ServiceAccount of the same namespace does not. With
// apiPriority.enabled false neither object is rendered.
func TestOperatorRequestsHaveAPriorityLevelOfTheirOwn(t *testing.T) {
	c := apiServer(t)
	op := mustRender(t, "tatara-operator", nil)
	const name = "tatara-system-tatara-operator"
	fs, plc := op.find("FlowSchema", name), op.find("PriorityLevelConfiguration", name)
	if fs == nil || plc == nil {
		t.Fatalf("the operator chart renders FlowSchema %v and PriorityLevelConfiguration %v named %s; kinds: %v", fs != nil, plc != nil, name, op.kinds())
	}
	if got := nested(t, fs, "spec", "distinguisherMethod", "type"); got != "ByNamespace" {
		t.Errorf("FlowSchema distinguisherMethod = %v, want ByNamespace", got)
	}
	off := mustRender(t, "tatara-operator", map[string]any{"apiPriority": map[string]any{"enabled": false}})
	if off.find("FlowSchema", name) != nil || off.find("PriorityLevelConfiguration", name) != nil {
		t.Errorf("apiPriority.enabled=false still renders the flow control objects")
	}
	applyForReal(t, c, []*unstructured.Unstructured{plc, fs})
	ctx := context.Background()
	t.Cleanup(func() {
		for _, o := range []*unstructured.Unstructured{fs, plc} {
			if err := c.Delete(context.Background(), o.DeepCopy()); err != nil {
				t.Errorf("deleting %s: %v", describe(o), err)
			}
		}
	})
	var applied unstructured.Unstructured
	applied.SetGroupVersionKind(fs.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(fs), &applied); err != nil {
		t.Fatal(err)
	}
	var plcApplied unstructured.Unstructured
	plcApplied.SetGroupVersionKind(plc.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(plc), &plcApplied); err != nil {
		t.Fatal(err)
	}

	// classifier returns a function that sends a request as user and returns the FlowSchema and
	// priority level UIDs the API server put it in.
	classifier := func(user string) func() (flowSchema, level string) {
		t.Helper()
		u, err := testEnv.AddUser(envtest.User{Name: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(u.Config())
		if err != nil {
			t.Fatal(err)
		}
		return func() (string, string) {
			// Any answer carries the classification, a 403 too: priority and fairness comes
			// before authorization.
			resp, err := hc.Get(u.Config().Host + "/api/v1/namespaces/tatara-agents/pods")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		}
	}
	// The API server takes up a new FlowSchema asynchronously.
	const operatorSA = "system:serviceaccount:tatara-system:tatara-operator"
	classifyOperator := classifier(operatorSA)
	var gotFS, gotLevel string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		gotFS, gotLevel = classifyOperator()
		return gotFS == string(applied.GetUID()), nil
	})
	if err != nil {
		t.Fatalf("a request of %s went to FlowSchema %q, want the chart's %s (%s)", operatorSA, gotFS, name, applied.GetUID())
	}
	if gotLevel != string(plcApplied.GetUID()) {
		t.Errorf("a request of %s went to priority level %q, want the chart's %s (%s)", operatorSA, gotLevel, name, plcApplied.GetUID())
	}
	if other, _ := classifier("system:serviceaccount:tatara-system:someone-else")(); other == "" || other == string(applied.GetUID()) {
		t.Errorf("another ServiceAccount's request went to FlowSchema %q; want a built-in one, not the operator's", other)
	}
}
