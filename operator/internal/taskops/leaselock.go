package taskops

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// leaseLock is a lock shared by every replica that serves the REST API: one Lease per key in
// the operator's namespace, created to take the lock and deleted to give it back. Its holder
// renews it every duration/3 for as long as it holds it, however long its call runs; a Lease
// not renewed for duration was left by a replica that died holding it, and is taken over. Reads
// go to the API server (APIReader): a cached read could see a Lease that is already gone, or miss
// one that was just created.
type leaseLock struct {
	client    client.Client
	reader    client.Reader
	namespace string
	// holder names this replica in the Leases it holds.
	holder string
	// duration is how long a Lease may go unrenewed before another replica takes it over.
	duration time.Duration
}

const (
	// leaseLockDuration is how long a held Lease may go unrenewed: three renewals missed in a row.
	leaseLockDuration = 15 * time.Second
	// leaseLockPoll is the longest wait between two attempts to take a held lock.
	leaseLockPoll = 50 * time.Millisecond
)

func newLeaseLock(c client.Client, reader client.Reader, namespace string) *leaseLock {
	host, _ := os.Hostname() // the pod name; only a label for whoever reads the Lease
	return &leaseLock{client: c, reader: reader, namespace: namespace, holder: host + "_" + crand.Text()[:8], duration: leaseLockDuration}
}

// leaseName is a valid object name for any key.
func leaseName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "tatara-subtask-lock-" + hex.EncodeToString(sum[:10])
}

// lock takes the lock of key, waiting until it is free or ctx ends.
func (l *leaseLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	name := leaseName(key)
	for {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.namespace,
				Annotations: map[string]string{"tatara.dev/lock-key": key}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.holder, LeaseDurationSeconds: ptr.To(int32(l.duration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}
		err := l.client.Create(ctx, lease)
		if err == nil {
			uid := lease.UID
			// Detached from the request: the lock is renewed, and given back, even when the
			// request's context has ended.
			renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
			renewed := make(chan struct{})
			go func() { defer close(renewed); l.renew(renewCtx, lease) }()
			return func() {
				stopRenewing()
				<-renewed
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				_ = l.client.Delete(ctx, lease, client.Preconditions{UID: &uid})
			}, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to take the lock %s/%s: %w", l.namespace, name, err)
		}
		var held coordinationv1.Lease
		switch err := l.reader.Get(ctx, types.NamespacedName{Namespace: l.namespace, Name: name}, &held); {
		case apierrors.IsNotFound(err):
			continue // given back meanwhile
		case err != nil:
			return nil, fmt.Errorf("failed to read the lock %s/%s: %w", l.namespace, name, err)
		case l.stale(&held):
			// Its holder died holding it. The precondition makes sure only this stale Lease
			// is deleted, never one taken meanwhile.
			uid, rv := held.UID, held.ResourceVersion
			if err := l.client.Delete(ctx, &held, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil &&
				!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("failed to take over the stale lock %s/%s: %w", l.namespace, name, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(leaseLockPoll/2 + rand.N(leaseLockPoll/2)):
		}
	}
}

// stale reports whether held went unrenewed for longer than duration.
func (l *leaseLock) stale(held *coordinationv1.Lease) bool {
	last := held.Spec.RenewTime
	if last == nil {
		last = held.Spec.AcquireTime
	}
	return last != nil && time.Since(last.Time) > l.duration
}

// renew moves lease's renewTime forward every duration/3 until ctx ends. A failed renewal is tried
// again at the next tick: two more chances before the Lease goes stale.
func (l *leaseLock) renew(ctx context.Context, lease *coordinationv1.Lease) {
	tick := time.NewTicker(l.duration / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		next := lease.DeepCopy()
		next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		if err := l.client.Update(ctx, next); err == nil {
			lease = next
		}
	}
}
