package taskops

import (
	"context"
	"sync"
)

// LockProject takes the lock that serialises subtask creation's count-then-create in the Project
// namespace/project: inside this process first (requests on one replica queue here, not on the
// API server), then across the replicas that serve the REST API, when Options.LockNamespace is
// set. Without the shared lock, requests reaching different replicas could each pass a limit
// with one slot left. Waiting gives up when ctx ends.
func (s *Service) LockProject(ctx context.Context, namespace, project string) (unlock func(), err error) {
	key := namespace + "/" + project
	unlockLocal, err := s.projectLocks.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	if s.sharedLocks == nil {
		return unlockLocal, nil
	}
	unlockShared, err := s.sharedLocks.lock(ctx, key)
	if err != nil {
		unlockLocal()
		return nil, err
	}
	return func() { unlockShared(); unlockLocal() }, nil
}

// keyedLock is one mutex per key; waiting for it gives up when the request's context ends.
// Keys are never removed: there is one per Project that ever had a subtask created.
type keyedLock struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func (k *keyedLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]chan struct{}{}
	}
	ch, ok := k.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		k.locks[key] = ch
	}
	k.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
