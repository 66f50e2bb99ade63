package egress

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"tatara.dev/operator/internal/egress/allowlist"
)

// TestProjectReconciler: the allow-list follows the Project: read when it appears, rebuilt when
// its spec changes (a host added is allowed, a host removed refused), invalid entries counted,
// and gone (everything refused, no_project) when the Project is deleted.
func TestProjectReconciler(t *testing.T) {
	scheme, err := schemeForTest()
	if err != nil {
		t.Fatal(err)
	}
	p := projectWith([]string{"one.example"}, nil, "")
	p.Namespace = "ns"
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	m := NewMetrics(prometheusRegistry(), "demo")
	r := &ProjectReconciler{Client: c, Project: types.NamespacedName{Namespace: "ns", Name: "demo"}, Policy: &allowlist.Policy{},
		Metrics: m, Log: discardLog()}
	ctx := context.Background()
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: r.Project}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(host string, want allowlist.Reason) {
		t.Helper()
		if _, got := r.Policy.Check(host, 443); got != want {
			t.Errorf("%s: %s, want %s", host, got, want)
		}
	}

	reconcile()
	check("one.example", allowlist.ReasonNoProject)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	reconcile()
	check("one.example", allowlist.ReasonAllowed)
	check("two.example", allowlist.ReasonNotAllowed)

	p.Spec.Egress.Allow = []string{"two.example", "10.0.0.1", "bad_entry.example"}
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	reconcile()
	check("one.example", allowlist.ReasonNotAllowed)
	check("two.example", allowlist.ReasonAllowed)
	if n := testutil.ToFloat64(m.InvalidAllowEntries); n != 2 {
		t.Errorf("invalid_allow_entries = %v, want 2", n)
	}

	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	reconcile()
	check("two.example", allowlist.ReasonNoProject)
}
