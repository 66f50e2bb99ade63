package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New("task-token-0123456789", "short")
	cases := []struct {
		name, in, want string
	}{
		{"bearer header", "Authorization: Bearer abc.def-123", "Authorization: Bearer [REDACTED]"},
		{"basic header", "authorization: basic dXNlcjpwYXNz", "authorization: basic [REDACTED]"},
		{"task token literal", "token is task-token-0123456789!", "token is [REDACTED]!"},
		{"short literal ignored", "a short note", "a short note"},
		{"json token field", `{"access_token":"abc123","x":1}`, `{"access_token":"[REDACTED]","x":1}`},
		{"json api key field", `{"api_key": "k-999"}`, `{"api_key": "[REDACTED]"}`},
		{"escaped json in json", `{"input":"{\"password\":\"hunter22\"}"}`, `{"input":"{\"password\":\"[REDACTED]\"}"}`},
		{"env assignment", "export GITLAB_TOKEN=glabc0123", "export GITLAB_TOKEN=[REDACTED]"},
		{"yaml secret", "client_secret: s3cr3tvalue", "client_secret: [REDACTED]"},
		{"token counts stay", "max_tokens: 4096 input_tokens=12", "max_tokens: 4096 input_tokens=12"},
		{"anthropic key", "key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "key [REDACTED]"},
		{"task token by shape", "curl -H x-t:tatara_" + strings.Repeat("0a", 32) + " done", "curl -H x-t:tatara_[REDACTED] done"},
		{"task token in json", `{"t":"tatara_` + strings.Repeat("f", 64) + `"}`, `{"t":"tatara_[REDACTED]"}`},
		{"task token glued to text", "x_tatara_" + strings.Repeat("1", 64) + "zz", "x_tatara_[REDACTED]zz"},
		{"not a task token", "tatara_operator_api_requests_total tatara_" + strings.Repeat("a", 63), "tatara_operator_api_requests_total tatara_" + strings.Repeat("a", 63)},
		{"github pat", "ghp_0123456789abcdefghijABCDEFGHIJ", "[REDACTED]"},
		{"aws key id", "AKIAIOSFODNN7EXAMPLE", "[REDACTED]"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[REDACTED]"},
		{"plain text untouched", "the build is green", "the build is green"},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactedJSONStaysValid(t *testing.T) {
	in := []byte(`{"headers":{"Authorization":"Bearer abcdefgh"},"token":"x\"y","nested":"{\"secret\":\"v\"}"}`)
	out := New().Bytes(in)
	if bytes.Equal(in, out) {
		t.Fatal("nothing redacted")
	}
	if !json.Valid(out) {
		t.Fatalf("redacted JSON is invalid: %s", out)
	}
}

func TestReplaceAttr(t *testing.T) {
	var buf bytes.Buffer
	r := New("task-token-0123456789")
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: r.ReplaceAttr}))
	log.Info("calling with task-token-0123456789",
		slog.String("header", "Bearer abcdefghij"),
		slog.Any("error", errors.New("401 for token task-token-0123456789")),
		slog.Group("g", slog.String("inner", "api_key=zzzzzzzz")))
	out := buf.String()
	for _, s := range []string{"task-token-0123456789", "abcdefghij", "zzzzzzzz"} {
		if strings.Contains(out, s) {
			t.Errorf("%q leaked: %s", s, out)
		}
	}
}
