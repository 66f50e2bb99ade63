// Package backend calls the HTTP services behind the tools (memory, chat, operator) and
// turns every failure into an error an agent can act on.
package backend

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/cabundle"
)

const (
	// maxResponseBytes bounds what one tool result may put into the model's context.
	maxResponseBytes = 1 << 20
	// maxErrorSnippet bounds the body quoted in an error.
	maxErrorSnippet = 512
)

// StatusError is a non-2xx answer.
type StatusError struct {
	Backend string
	Method  string
	Path    string
	Status  int
	Snippet string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s backend answered %d %s to %s %s", e.Backend, e.Status, http.StatusText(e.Status), e.Method, e.Path)
	if e.Snippet != "" {
		msg += ": " + e.Snippet
	}
	return msg
}

// Client is one backend.
type Client struct {
	Name    string // memory, chat, operator: used in errors
	BaseURL string
	// Token is sent as a bearer token when set: the Task token, to every backend.
	Token string
	// Headers are added to every request (e.g. the calling project and task).
	Headers map[string]string
	HTTP    *http.Client
}

// Do sends req and returns the response body as text.
func (c *Client) Do(ctx context.Context, req catalog.Request) (string, error) {
	u := strings.TrimRight(c.BaseURL, "/") + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var body io.Reader
	if req.Body != nil {
		b, err := json.Marshal(req.Body)
		if err != nil {
			return "", fmt.Errorf("failed to encode %s request body: %w", c.Name, err)
		}
		body = bytes.NewReader(b)
	}
	httpReq, err := http.NewRequestWithContext(ctx, req.Method, u, body)
	if err != nil {
		return "", fmt.Errorf("failed to build %s request %s %s: %w", c.Name, req.Method, req.Path, err)
	}
	httpReq.Header.Set("Accept", "application/json")
	if body != nil {
		httpReq.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Headers {
		httpReq.Header.Set(k, v)
	}
	if c.Token != "" {
		httpReq.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(httpReq)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("%s backend did not answer %s %s in time: %w", c.Name, req.Method, req.Path, context.DeadlineExceeded)
		}
		return "", fmt.Errorf("failed to reach %s backend for %s %s: %w", c.Name, req.Method, req.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return "", fmt.Errorf("failed to read %s backend answer to %s %s: %w", c.Name, req.Method, req.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", &StatusError{Backend: c.Name, Method: req.Method, Path: req.Path, Status: resp.StatusCode, Snippet: snippet(data, maxErrorSnippet)}
	}
	if len(data) > maxResponseBytes {
		return snippet(data, maxResponseBytes) + "\n[answer truncated at 1 MiB]", nil
	}
	if len(data) == 0 {
		return fmt.Sprintf("%s %s: %d %s", req.Method, req.Path, resp.StatusCode, http.StatusText(resp.StatusCode)), nil
	}
	return string(data), nil
}

// snippet returns at most n bytes of b, cut on a rune boundary, trimmed.
func snippet(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
		return strings.TrimSpace(string(b)) + "..."
	}
	return strings.TrimSpace(string(b))
}

// TaskClients are the three backends of one Task's cli: each gets the Task token as a bearer
// (memory and chat review it with the operator, POST /api/v1/tokenreviews) and the identity
// headers X-Tatara-Project and X-Tatara-Task, which say what the token will be reviewed as.
// Memory and chat use hc, the operator operatorHC (OperatorHTTPClient); nil is http.DefaultClient.
func TaskClients(memoryURL, chatURL, operatorURL, project, task, token string, hc, operatorHC *http.Client) map[catalog.Target]*Client {
	identity := map[string]string{"X-Tatara-Project": project, "X-Tatara-Task": task}
	return map[catalog.Target]*Client{
		catalog.TargetMemory:   {Name: "memory", BaseURL: memoryURL, Token: token, Headers: identity, HTTP: hc},
		catalog.TargetChat:     {Name: "chat", BaseURL: chatURL, Token: token, Headers: identity, HTTP: hc},
		catalog.TargetOperator: {Name: "operator", BaseURL: operatorURL, Token: token, Headers: identity, HTTP: operatorHC},
	}
}

// OperatorHTTPClient is the operator backend's HTTP client. Without a CA bundle it is a plain
// client (the system roots, should the URL be https). With one (PEM), it trusts exactly the
// bundle's certificates for the operator, not the system roots: the operator's certificate comes
// from the cluster's own CA, and nothing else may pose as the operator to collect Task tokens.
func OperatorHTTPClient(caBundle string) (*http.Client, error) {
	if caBundle == "" {
		return &http.Client{}, nil
	}
	pool, err := cabundle.Parse([]byte(caBundle))
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
