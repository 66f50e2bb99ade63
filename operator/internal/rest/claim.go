package api

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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/redact"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/token"
)

// ToolPodClaim labels the claim endpoint in the request counter (it is not an agent tool).
const ToolPodClaim = "pod_claim"

// The claim endpoint (claim.OperatorPath) is how a pool pod learns the Task that claimed it; the
// pool's lifecycle is in the controller's pool_controller.go. The pod's cli proves which pod it is
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

// poolPod is the pod a reviewed token was bound to.
type poolPod struct {
	namespace, name string
	uid             types.UID
}

// podReviews keeps the API server's answers about pod tokens, by the token's hash.
type podReviews struct {
	mu      sync.Mutex
	reviews map[[32]byte]podReview
}

type podReview struct {
	pod     poolPod
	expires time.Time
}

func (p *podReviews) get(key [32]byte, now time.Time) (poolPod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.reviews[key]
	if !ok || now.After(r.expires) {
		return poolPod{}, false
	}
	return r.pod, true
}

func (p *podReviews) put(key [32]byte, pod poolPod, now time.Time) {
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
	if pod.name != "" {
		attrs = append(attrs, "namespace", pod.namespace, "pod", pod.name)
	}
	switch b := body.(type) {
	case *claim.Answer:
		attrs = append(attrs, "task", b.Task, "kind", b.Kind)
	case errorBody:
		attrs = append(attrs, "error", redact.Truncate(b.Error))
	}
	s.opts.Log.Info("pod claim", attrs...)
}

func (s *Server) servePodClaim(w http.ResponseWriter, r *http.Request) (int, any, poolPod) {
	tok, ok := token.FromAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized, errorBody{Error: fmt.Sprintf("missing bearer token: send Authorization: Bearer <the pod's ServiceAccount token for audience %s>", claim.Audience)}, poolPod{}
	}
	wait := time.Duration(0)
	if v := r.URL.Query().Get(claim.WaitParam); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 {
			return http.StatusBadRequest, errorBody{Error: fmt.Sprintf("invalid %s %q: want whole seconds >= 0", claim.WaitParam, redact.Truncate(v))}, poolPod{}
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
		answer, started, aerr := s.claimOf(ctx, pod)
		if aerr != nil {
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
func (s *Server) reviewPodToken(ctx context.Context, tok string, src netip.Addr) (poolPod, *apiError) {
	key := sha256.Sum256([]byte(tok))
	if pod, ok := s.podReviews.get(key, time.Now()); ok {
		return pod, nil
	}
	refund, ok, wait := s.podReviewFailures.reserve(src)
	if !ok {
		aerr := errorf(http.StatusTooManyRequests, "too many pod tokens from %s failed their review (budget: %d, then one per %s): retry after %ss",
			src, PodReviewFailures.Burst, time.Duration(float64(time.Second)/PodReviewFailures.PerSecond), retryAfter(wait))
		aerr.retryAfter = retryAfter(wait)
		return poolPod{}, aerr
	}
	pod, aerr := s.sendPodTokenReview(ctx, tok)
	if aerr == nil || aerr.status != http.StatusUnauthorized {
		refund() // only a token the API server refused spends the budget
	}
	if aerr != nil {
		return poolPod{}, aerr
	}
	s.podReviews.put(key, pod, time.Now())
	return pod, nil
}

// sendPodTokenReview sends the TokenReview of tok: a 401 for a token that is not a live pod's,
// bound to it, for claim.Audience.
func (s *Server) sendPodTokenReview(ctx context.Context, tok string) (poolPod, *apiError) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{claim.Audience}}}
	if err := s.opts.Client.Create(ctx, review); err != nil {
		return poolPod{}, errorf(http.StatusInternalServerError, "failed to review the pod's token: %v", err)
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, claim.Audience) {
		return poolPod{}, errorf(http.StatusUnauthorized, "invalid token: not a live ServiceAccount token for audience %s", claim.Audience)
	}
	names, uids := st.User.Extra[extraPodName], st.User.Extra[extraPodUID]
	ns, _, isSA := strings.Cut(strings.TrimPrefix(st.User.Username, "system:serviceaccount:"), ":")
	if len(names) != 1 || len(uids) != 1 || !strings.HasPrefix(st.User.Username, "system:serviceaccount:") || !isSA {
		return poolPod{}, errorf(http.StatusUnauthorized, "invalid token: not bound to a pod (project a serviceAccountToken volume with audience %s)", claim.Audience)
	}
	return poolPod{namespace: ns, name: names[0], uid: types.UID(uids[0])}, nil
}

// claimOf is the answer for a claimed pool pod, with when its claim was recorded; nil while the
// pod is unclaimed, or while the cache does not show all of the claim yet (the Task's attempt,
// its token Secret).
func (s *Server) claimOf(ctx context.Context, pp poolPod) (*claim.Answer, time.Time, *apiError) {
	var pod corev1.Pod
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: pp.namespace, Name: pp.name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, time.Time{}, errorf(http.StatusGone, "pod %s/%s is gone", pp.namespace, pp.name)
		}
		return nil, time.Time{}, errorf(http.StatusInternalServerError, "failed to get pod %s/%s: %v", pp.namespace, pp.name, err)
	}
	if pod.UID != pp.uid {
		return nil, time.Time{}, errorf(http.StatusGone, "pod %s/%s (uid %s) is gone", pp.namespace, pp.name, pp.uid)
	}
	if pod.Labels[agent.LabelPool] == "" {
		return nil, time.Time{}, errorf(http.StatusForbidden, "pod %s/%s is not a warm pool pod", pp.namespace, pp.name)
	}
	owner := metav1.GetControllerOf(&pod)
	if owner == nil || owner.Kind != "Task" || owner.APIVersion != tatarav1.GroupVersion.String() {
		if !pod.DeletionTimestamp.IsZero() {
			return nil, time.Time{}, errorf(http.StatusGone, "pool pod %s/%s is being deleted unclaimed", pp.namespace, pp.name)
		}
		return nil, time.Time{}, nil
	}
	var task tatarav1.Task
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, &task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, time.Time{}, errorf(http.StatusGone, "task %q, which claimed pod %s, is gone", owner.Name, pod.Name)
		}
		return nil, time.Time{}, errorf(http.StatusInternalServerError, "failed to get task %q: %v", owner.Name, err)
	}
	if task.UID != owner.UID {
		return nil, time.Time{}, errorf(http.StatusGone, "task %q, which claimed pod %s, is gone", owner.Name, pod.Name)
	}
	if task.Spec.Cancel != nil || task.Status.Phase.Terminal() {
		return nil, time.Time{}, errorf(http.StatusGone, "task %q, which claimed pod %s, has ended", task.Name, pod.Name)
	}
	cur := task.Status.CurrentAttempt()
	if cur == nil || !cur.Warm || cur.PodName != pod.Name || (cur.PodUID != "" && cur.PodUID != pod.UID) {
		return nil, time.Time{}, nil
	}
	if cur.Finished() {
		return nil, time.Time{}, errorf(http.StatusGone, "attempt %d of task %q, in pod %s, has ended", cur.Number, task.Name, pod.Name)
	}
	var project tatarav1.Project
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.ProjectRef.Name}, &project); err != nil {
		return nil, time.Time{}, errorf(http.StatusInternalServerError, "failed to get project %q: %v", task.Spec.ProjectRef.Name, err)
	}
	tok, aerr := s.mintedToken(ctx, &task)
	if aerr != nil {
		if aerr.status == http.StatusUnauthorized {
			return nil, time.Time{}, nil // the Secret is not in the cache yet
		}
		return nil, time.Time{}, aerr
	}
	claimedAt := cur.StartedAt.Time
	if at, err := time.Parse(time.RFC3339Nano, pod.Annotations[claim.AnnotationClaimedAt]); err == nil {
		claimedAt = at // to the nanosecond; the attempt's start has whole seconds
	}
	return &claim.Answer{Assignment: agent.Assignment(&task, &project), Token: tok, ClaimedAt: claimedAt}, claimedAt, nil
}
