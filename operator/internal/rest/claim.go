package rest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/redact"
	"tatara.dev/operator/internal/taskops"
	"tatara.dev/operator/internal/token"
)

// ToolPodClaim labels the claim endpoint in the request counter (it is not an agent tool).
const ToolPodClaim = "pod_claim"

// The claim endpoint (claim.OperatorPath) is how a pool pod learns the Task that claimed it; the
// pool's lifecycle is in the controller's pool_controller.go. This file authenticates the pod and
// long-polls; whether the pod is claimed, and the answer, is taskops.Service.ClaimOf. The pod's cli proves which pod it is
// with a ServiceAccount token the kubelet projected for that pod alone, for claim.Audience, which
// the API server reviews: no credential of any Task is in a pod before its claim, and the answer,
// which carries the Task's token, goes only to the claimed pod.
const (
	// claimPoll is how often a waiting claim looks at the cache again: a claim reaches the pod
	// within this (plus the cache's lag) of being made, on every replica.
	claimPoll = 20 * time.Millisecond
	// podReviewTTL is how long the API server's answer about a pod token is reused: the pod asks
	// again every claim.MaxWait, and a review per ask would be an API request per pool pod per 20 s.
	podReviewTTL = time.Minute
	// maxPodReviews bounds the reviews kept; past it they are all dropped and asked again.
	maxPodReviews = 4096
)

// PodReviewFailures is the budget of failed pod-token reviews per source address. Anything the
// operator's NetworkPolicy admits can call the claim endpoint without a credential of its own, and
// every token the cache does not know costs a TokenReview on the API server; a failed one spends
// the caller's budget, a passing one does not. A pool pod's honest token passes, and fails only
// once its pod is going (a cli then asks every few seconds at most); a flood of forged ones costs
// the API server the burst, then one review per 5 s, per source: the rest are refused with 429
// before any review is sent (before: up to the source's 50 requests/s).
var PodReviewFailures = RateLimit{PerSecond: 0.2, Burst: 20}

// The user info extras of a pod-bound ServiceAccount token (KEP-1205).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// podReviews keeps the API server's answers about pod tokens, by the token's hash.
type podReviews struct {
	mu      sync.Mutex
	reviews map[[32]byte]podReview
}

type podReview struct {
	pod     taskops.PoolPod
	expires time.Time
}

func (p *podReviews) get(key [32]byte, now time.Time) (taskops.PoolPod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.reviews[key]
	if !ok || now.After(r.expires) {
		return taskops.PoolPod{}, false
	}
	return r.pod, true
}

func (p *podReviews) put(key [32]byte, pod taskops.PoolPod, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reviews == nil || len(p.reviews) >= maxPodReviews {
		p.reviews = map[[32]byte]podReview{}
	}
	p.reviews[key] = podReview{pod: pod, expires: now.Add(podReviewTTL)}
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// podClaim answers GET claim.OperatorPath: the claim of the caller's pool pod, once a Task has
// made it (200 with claim.Answer), waiting up to ?wait= seconds for it (204 after); 410 for a pod
// that will never serve a Task.
func (s *Server) podClaim(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status, body, pod := s.servePodClaim(w, r)
	if body == nil {
		w.WriteHeader(status)
	} else {
		writeJSON(w, status, body)
	}
	s.count(ToolPodClaim, status)
	attrs := []any{"tool", ToolPodClaim, "code", status, "duration_seconds", time.Since(start).Seconds()}
	if pod.Name != "" {
		attrs = append(attrs, "namespace", pod.Namespace, "pod", pod.Name)
	}
	switch b := body.(type) {
	case *claim.Answer:
		attrs = append(attrs, "task", b.Task, "kind", b.Kind)
	case errorBody:
		attrs = append(attrs, "error", redact.Truncate(b.Error))
	}
	s.opts.Log.Info("pod claim", attrs...)
}

func (s *Server) servePodClaim(w http.ResponseWriter, r *http.Request) (int, any, taskops.PoolPod) {
	tok, ok := token.FromAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized, errorBody{Error: fmt.Sprintf("missing bearer token: send Authorization: Bearer <the pod's ServiceAccount token for audience %s>", claim.Audience)}, taskops.PoolPod{}
	}
	wait := time.Duration(0)
	if v := r.URL.Query().Get(claim.WaitParam); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 {
			return http.StatusBadRequest, errorBody{Error: fmt.Sprintf("invalid %s %q: want whole seconds >= 0", claim.WaitParam, redact.Truncate(v))}, taskops.PoolPod{}
		}
		wait = min(time.Duration(secs)*time.Second, claim.MaxWait)
	}
	pod, aerr := s.reviewPodToken(r.Context(), tok, sourceAddr(r))
	if aerr != nil && aerr.retryAfter != "" {
		w.Header().Set("Retry-After", aerr.retryAfter)
	}
	if aerr != nil {
		return aerr.status, errorBody{Error: aerr.msg}, pod
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		answer, started, err := s.ops.ClaimOf(ctx, pod)
		if aerr := fromOps(err); aerr != nil {
			return aerr.status, errorBody{Error: aerr.msg}, pod
		}
		if answer != nil {
			if s.opts.Metrics != nil {
				s.opts.Metrics.WarmPoolClaimDelivery.Observe(time.Since(started).Seconds())
			}
			return http.StatusOK, answer, pod
		}
		select {
		case <-ctx.Done():
			return http.StatusNoContent, nil, pod
		case <-time.After(claimPoll):
		}
	}
}

// reviewPodToken asks the API server whose token tok is: it must be a live pod's, bound to it,
// for claim.Audience. A review that fails spends src's PodReviewFailures budget; without budget
// left the answer is a 429 and no review is sent.
func (s *Server) reviewPodToken(ctx context.Context, tok string, src netip.Addr) (taskops.PoolPod, *apiError) {
	key := sha256.Sum256([]byte(tok))
	if pod, ok := s.podReviews.get(key, time.Now()); ok {
		return pod, nil
	}
	refund, ok, wait := s.podReviewFailures.reserve(src)
	if !ok {
		aerr := errorf(http.StatusTooManyRequests, "too many pod tokens from %s failed their review (budget: %d, then one per %s): retry after %ss",
			src, PodReviewFailures.Burst, time.Duration(float64(time.Second)/PodReviewFailures.PerSecond), retryAfter(wait))
		aerr.retryAfter = retryAfter(wait)
		return taskops.PoolPod{}, aerr
	}
	pod, aerr := s.sendPodTokenReview(ctx, tok)
	if aerr == nil || aerr.status != http.StatusUnauthorized {
		refund() // only a token the API server refused spends the budget
	}
	if aerr != nil {
		return taskops.PoolPod{}, aerr
	}
	s.podReviews.put(key, pod, time.Now())
	return pod, nil
}

// sendPodTokenReview sends the TokenReview of tok: a 401 for a token that is not a live pod's,
// bound to it, for claim.Audience.
func (s *Server) sendPodTokenReview(ctx context.Context, tok string) (taskops.PoolPod, *apiError) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{claim.Audience}}}
	if err := s.opts.Client.Create(ctx, review); err != nil {
		return taskops.PoolPod{}, errorf(http.StatusInternalServerError, "failed to review the pod's token: %v", err)
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, claim.Audience) {
		return taskops.PoolPod{}, errorf(http.StatusUnauthorized, "invalid token: not a live ServiceAccount token for audience %s", claim.Audience)
	}
	names, uids := st.User.Extra[extraPodName], st.User.Extra[extraPodUID]
	ns, _, isSA := strings.Cut(strings.TrimPrefix(st.User.Username, "system:serviceaccount:"), ":")
	if len(names) != 1 || len(uids) != 1 || !strings.HasPrefix(st.User.Username, "system:serviceaccount:") || !isSA {
		return taskops.PoolPod{}, errorf(http.StatusUnauthorized, "invalid token: not bound to a pod (project a serviceAccountToken volume with audience %s)", claim.Audience)
	}
	return taskops.PoolPod{Namespace: ns, Name: names[0], UID: types.UID(uids[0])}, nil
}
