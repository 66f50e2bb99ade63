package rest

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/taskops"
	"tatara.dev/operator/internal/token"
)

// tokenCacheGrace is how long an unknown token is looked up again in the cache before it is
// refused. It also makes guessing tokens slower, which their 256 random bits make pointless anyway.
const tokenCacheGrace = 2 * time.Second

// maxTokenGraceWaiters bounds the requests that wait out tokenCacheGrace at the same time, and
// maxTokenGraceWaitersPerSource those from one source address: one pod sending unknown tokens
// cannot hold the slots a fresh Task's first calls (from its own pod) need.
const (
	maxTokenGraceWaiters          = 32
	maxTokenGraceWaitersPerSource = 2
)

// graceSlots are the places of the requests waiting out tokenCacheGrace.
type graceSlots struct {
	all chan struct{}

	mu       sync.Mutex
	bySource map[netip.Addr]int
}

func newGraceSlots() *graceSlots {
	return &graceSlots{all: make(chan struct{}, maxTokenGraceWaiters), bySource: map[netip.Addr]int{}}
}

// take holds a place for a request from src, if one is free.
func (g *graceSlots) take(src netip.Addr) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bySource[src] >= maxTokenGraceWaitersPerSource {
		return nil, false
	}
	select {
	case g.all <- struct{}{}:
	default:
		return nil, false
	}
	g.bySource[src]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		<-g.all
		if g.bySource[src]--; g.bySource[src] <= 0 {
			delete(g.bySource, src)
		}
	}, true
}

// authenticate maps the bearer token to its Task. The Task's status.tokenHash, which only the
// operator writes (status subresource), is the record of the one token it minted: the token's
// hash finds the Task through the cache's status.tokenHash index. The token is then accepted only
// while the Task is active (not in a terminal phase, not cancelled: taskops.EndedTask), and only
// if the Secret the operator made for it, under the expected name and controlled by the Task,
// still holds it (taskops.Service.MintedToken). A Secret made by anyone else (another name, a
// forged owner reference, one planted in advance) authenticates nobody.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*tatarav1.Task, *apiError) {
	tok, ok := token.FromAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return nil, errorf(http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <TATARA_TOKEN>")
	}
	return s.taskOfToken(ctx, tok, sourceAddr(r))
}

// taskOfToken is the Task an active token belongs to; every other token is a 401 (and a lookup
// failure a 500). authenticate and the token review share it, so a backend learns exactly what
// the operator itself would decide. src is the caller's address, which bounds its waits.
func (s *Server) taskOfToken(ctx context.Context, tok string, src netip.Addr) (*tatarav1.Task, *apiError) {
	if !token.Valid(tok) {
		return nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	hash := token.Hash(tok)
	var tasks tatarav1.TaskList
	// A token minted a moment ago may not be in the cache yet (its status write still on its
	// way): look again for a short, bounded while before refusing it. At most
	// maxTokenGraceWaiters requests wait at once, maxTokenGraceWaitersPerSource from one address;
	// past that an unknown token is refused at once, so a flood of bad tokens cannot hold goroutines
	// for the whole grace, nor every place.
	if err := s.opts.Client.List(ctx, &tasks, client.MatchingFields{index.TaskTokenHash: hash}); err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to look up token: %v", err)
	}
	if len(tasks.Items) == 0 {
		if release, ok := s.grace.take(src); ok {
			defer release()
			deadline := time.Now().Add(tokenCacheGrace)
			for len(tasks.Items) == 0 && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return nil, errorf(http.StatusUnauthorized, "invalid token")
				case <-time.After(tokenCacheGrace / 20):
				}
				if err := s.opts.Client.List(ctx, &tasks, client.MatchingFields{index.TaskTokenHash: hash}); err != nil {
					return nil, errorf(http.StatusInternalServerError, "failed to look up token: %v", err)
				}
			}
		}
	}
	if len(tasks.Items) != 1 {
		return nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	task := tasks.Items[0]
	if !token.Matches(tok, task.Status.TokenHash) {
		return nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	if err := taskops.EndedTask(&task); err != nil {
		return nil, fromOps(err)
	}
	if _, err := s.ops.MintedToken(ctx, &task); err != nil {
		return nil, fromOps(err)
	}
	return &task, nil
}
