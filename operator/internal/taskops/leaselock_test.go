package taskops

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func newTestLeaseLocks(t *testing.T, duration time.Duration, objs ...client.Object) (a, b *leaseLock, c client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	a = &leaseLock{client: c, reader: c, namespace: "ops", holder: "a", duration: duration}
	b = &leaseLock{client: c, reader: c, namespace: "ops", holder: "b", duration: duration}
	return a, b, c
}

// TestLeaseLockOutlivesItsDuration: a holder whose handler runs for several lease durations keeps
// the lock (it renews it), and another replica gets it only once it is given back.
func TestLeaseLockOutlivesItsDuration(t *testing.T) {
	// A lease of seconds: the renew goroutine may stall for most of one on a loaded machine
	// without the lease going stale. The contender tries for two durations: without renewals
	// it would get the lock after one.
	const duration = 2 * time.Second
	a, b, _ := newTestLeaseLocks(t, duration)
	unlock, err := a.lock(context.Background(), "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*duration)
	defer cancel()
	if unlockB, err := b.lock(ctx, "ns/p"); err == nil {
		unlockB()
		t.Fatalf("a second replica took the lock while its holder still held it (within %s of taking it, the lease lasts %s)", 2*duration, duration)
	}
	unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	unlockB, err := b.lock(ctx, "ns/p")
	if err != nil {
		t.Fatalf("the lock given back was not taken: %v", err)
	}
	unlockB()
}

// TestLeaseLockOfADeadHolderIsTakenOver: a Lease that nobody renews (its replica died holding it)
// is taken over once it is older than the duration, and not before.
func TestLeaseLockOfADeadHolderIsTakenOver(t *testing.T) {
	const duration = 300 * time.Millisecond
	renewed := metav1.NewMicroTime(time.Now())
	dead := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName("ns/p"), Namespace: "ops"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), AcquireTime: &renewed, RenewTime: &renewed}}
	_, b, _ := newTestLeaseLocks(t, duration, dead)
	ctx, cancel := context.WithTimeout(context.Background(), 10*duration)
	defer cancel()
	unlock, err := b.lock(ctx, "ns/p")
	if err != nil {
		t.Fatalf("the dead holder's lock was not taken over: %v", err)
	}
	unlock()
	// Counted from the renewal the Lease records, which is stamped before the fake client is
	// built. The API stores it to the microsecond, so it may read up to 1µs earlier than stamped.
	if waited := time.Since(renewed.Time); waited < duration-time.Microsecond {
		t.Fatalf("taken over %s after the last renewal, before the lease's %s", waited, duration)
	}
}
