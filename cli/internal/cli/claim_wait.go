package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/redact"
)

// EnvTaskKind is the pod's Task kind; a pool pod is built for one kind and refuses a claim of
// another.
const EnvTaskKind = "TATARA_TASK_KIND"

// Bounds of the claim wait. The first retry after a server error or a transport failure comes
// quickly (an operator restart is short); later ones back off, so a long outage costs the
// operator one request every few seconds per pool pod, not a stream of them.
const (
	claimBackoffMin = 100 * time.Millisecond
	claimBackoffMax = 5 * time.Second
	// claimRequestSlack is how long past claim.MaxWait one request may take before it is given
	// up: a wait the operator holds open longer than promised is a stuck connection.
	claimRequestSlack = 15 * time.Second
	// maxClaimAnswerBytes bounds the operator's answer: the directive, its largest field, is
	// bounded by the claim file's own limit.
	maxClaimAnswerBytes = 2 << 20
)

// taskIdentity is whom the MCP server acts for: the environment's Task in a Task's pod, the
// claiming Task in a pool pod.
type taskIdentity struct {
	project, task, token string
	// claimedAt is when the Task claimed this pool pod; zero in a Task's own pod.
	claimedAt time.Time
}

// awaitClaim waits for the Task that claims this pool pod and writes its assignment, without the
// token, to claimFile for the wrapper and the git gateway. The caller listens for MCP only after
// that: the wrapper reads the file as soon as the MCP port accepts a connection.
func awaitClaim(ctx context.Context, claimFile, operatorURL string, hc *http.Client, log *slog.Logger) (claim.Answer, error) {
	tokenFile := os.Getenv(claim.EnvOperatorTokenFile)
	if tokenFile == "" {
		return claim.Answer{}, fmt.Errorf("%s is set but %s is not: a pool pod's cli needs its token to ask for the claim", claim.EnvFile, claim.EnvOperatorTokenFile)
	}
	start := time.Now()
	log.Info("waiting for the claim", "claim_file", claimFile, "kind", os.Getenv(EnvTaskKind))
	w := claimWait{operatorURL: operatorURL, tokenFile: tokenFile, kind: os.Getenv(EnvTaskKind), hc: hc, log: log}
	a, err := w.await(ctx)
	if err != nil {
		return claim.Answer{}, err
	}
	if err := claim.WriteFile(claimFile, a.Assignment); err != nil {
		return claim.Answer{}, err
	}
	log.Info("pod claimed", "project", a.Project, "task", a.Task, "kind", a.Kind,
		"waited", time.Since(start).Round(time.Millisecond).String(), "claim_file", claimFile)
	return a, nil
}

// claimWait is a pool pod's wait for its Task: it asks the operator until a Task has claimed the
// pod. It holds the operator's URL and client, and the path of the pod-bound token, which is read
// again for every request because the kubelet rotates it while the pod waits, possibly for hours.
type claimWait struct {
	operatorURL string
	tokenFile   string
	kind        string // TATARA_TASK_KIND; "" accepts any
	hc          *http.Client
	log         *slog.Logger
}

// await returns the claiming Task's answer. A 204 (still unclaimed) asks again at once; a server
// error or a failed request is retried after a capped backoff; 401, 403, 410, any other status
// and an answer that is not a usable claim end the wait with an error, since asking again cannot
// change them. When ctx ends first it returns ctx's error.
func (c claimWait) await(ctx context.Context) (claim.Answer, error) {
	u, err := url.Parse(strings.TrimSuffix(c.operatorURL, "/") + claim.OperatorPath)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return claim.Answer{}, fmt.Errorf("invalid %s %q: the claim wait needs the operator's http(s) URL", EnvOperatorURL, c.operatorURL)
	}
	u.RawQuery = url.Values{claim.WaitParam: {strconv.Itoa(int(claim.MaxWait / time.Second))}}.Encode()
	backoff := claimBackoffMin
	for {
		a, retry, err := c.ask(ctx, u.String())
		switch {
		case ctx.Err() != nil:
			return claim.Answer{}, ctx.Err()
		case err == nil && !retry:
			return a, nil
		case err == nil: // 204: the wait ended unclaimed
			backoff = claimBackoffMin
			continue
		case !retry:
			return claim.Answer{}, err
		}
		c.log.Warn("claim request failed; retrying", "error", err.Error(), "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return claim.Answer{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, claimBackoffMax)
	}
}

// ask makes one claim request. It returns the answer on 200, retry with no error on 204, retry
// with an error for what may pass (a transport failure, a 5xx), and an error alone for what will
// not.
func (c claimWait) ask(ctx context.Context, target string) (a claim.Answer, retry bool, err error) {
	// Read for every request: the kubelet replaces the projected token before it expires.
	token, err := readTokenFile(claim.EnvOperatorTokenFile, c.tokenFile)
	if err != nil {
		return claim.Answer{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, claim.MaxWait+claimRequestSlack)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return claim.Answer{}, false, fmt.Errorf("failed to build the claim request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return claim.Answer{}, true, fmt.Errorf("failed to ask the operator for the pod's claim: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxClaimAnswerBytes+1))
	if err != nil {
		return claim.Answer{}, true, fmt.Errorf("failed to read the operator's claim answer (%d): %w", resp.StatusCode, err)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		a, err := c.decode(body)
		return a, false, err
	case code == http.StatusNoContent:
		return claim.Answer{}, true, nil
	case code >= 500:
		return claim.Answer{}, true, c.statusError(code, body, token)
	default: // 401, 403 (token refused), 410 (never to be claimed), anything unexpected
		return claim.Answer{}, false, c.statusError(code, body, token)
	}
}

// decode checks a 200 answer: a complete assignment with a token, for this pod's kind.
func (c claimWait) decode(body []byte) (claim.Answer, error) {
	if len(body) > maxClaimAnswerBytes {
		return claim.Answer{}, fmt.Errorf("malformed claim answer from the operator: larger than %d bytes", maxClaimAnswerBytes)
	}
	var a claim.Answer
	if err := json.Unmarshal(body, &a); err != nil {
		return claim.Answer{}, fmt.Errorf("malformed claim answer from the operator: %w", err)
	}
	if err := a.Validate(); err != nil {
		return claim.Answer{}, fmt.Errorf("malformed claim answer from the operator: %w", err)
	}
	if a.Token == "" {
		return claim.Answer{}, fmt.Errorf("malformed claim answer from the operator: task %q comes without a token", a.Task)
	}
	if c.kind != "" && a.Kind != c.kind {
		return claim.Answer{}, fmt.Errorf("claim refused: task %q is of kind %q, but this pod was built for kind %q (%s)", a.Task, a.Kind, c.kind, EnvTaskKind)
	}
	return a, nil
}

// statusError names the status and the operator's reason: the "error" of its JSON body, or the
// start of the body, masked (the projected token among the rest) and cut.
func (c claimWait) statusError(code int, body []byte, token string) error {
	reason := strings.TrimSpace(string(body))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		reason = e.Error
	}
	msg := fmt.Sprintf("the operator answered the claim request with %d %s", code, http.StatusText(code))
	if reason = redact.Truncate(redact.New(token).String(reason)); reason != "" {
		msg += ": " + reason
	}
	return errors.New(msg)
}
