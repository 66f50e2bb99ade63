package integration

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	restclient "k8s.io/client-go/rest"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/operator/internal/rest"
)

// clientFrom is an HTTP client whose connections leave from local address ip (any of 127/8 reaches
// the operator's 127.0.0.1), so a test can speak as several sources.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
}

func claimFrom(t testing.TB, c *http.Client, base, tok string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s?%s=0", base, claim.OperatorPath, claim.WaitParam), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", claim.OperatorPath, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestForgedClaimsCostABoundedNumberOfTokenReviews: the claim endpoint needs no credential of the
// caller's own, and each token it does not know is a TokenReview on the API server. A source that
// sends forged tokens gets its few failed reviews, then 429s with Retry-After and no review at
// all; another source's honest pool pod is still served.
func TestForgedClaimsCostABoundedNumberOfTokenReviews(t *testing.T) {
	budget := int64(rest.PodReviewFailures.Burst)
	forged := int(budget) + 25
	var sentReviews atomic.Int64
	opCfg := restclient.CopyConfig(cfg)
	opCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/tokenreviews") {
				sentReviews.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	op := startOperatorOn(t, opCfg)
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(1))
	pool := waitPool(t, ns, 1)

	attacker := clientFrom("127.0.0.1")
	codes := map[int]int{}
	for i := range forged {
		jwt := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmb3JnZWQtJWQifQ.%040d", i)
		code, h := claimFrom(t, attacker, op.url, jwt)
		codes[code]++
		if code == http.StatusTooManyRequests && h.Get("Retry-After") == "" {
			t.Errorf("forged claim %d: 429 without Retry-After", i)
		}
	}
	sent := sentReviews.Load()
	t.Logf("%d forged claims from one source: answers %v, %d TokenReviews sent", forged, codes, sent)
	// The budget refills one review per 5 s: a slow run may get one or two more than the burst.
	if sent < budget || sent > budget+2 || codes[http.StatusUnauthorized] != int(sent) || codes[http.StatusTooManyRequests] != forged-int(sent) {
		t.Errorf("%d forged claims: answers %v and %d TokenReviews, want about %d reviews (each a 401) and 429 for the rest", forged, codes, sent, budget)
	}

	// An honest pool pod elsewhere is not held up by the flood.
	honest := clientFrom("127.0.0.2")
	if code, _ := claimFrom(t, honest, op.url, podToken(t, &pool[0], claim.Audience)); code != http.StatusNoContent {
		t.Errorf("an unclaimed pool pod's own token from another source = %d, want 204", code)
	}
}
