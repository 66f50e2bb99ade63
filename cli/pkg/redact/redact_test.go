package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
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

// Every string attribute of a log line, the message included, is cut to MaxAttrBytes with the
// number of bytes cut; the longest line stays small whatever the agent sends.
func TestReplaceAttrBoundsEveryField(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: New().ReplaceAttr}))
	huge := strings.Repeat("é", 2_500_000) // 5 MB, two bytes a rune
	log.Info(huge, "description", huge, "error", errors.New(huge), "short", "kept as it is")
	line := buf.String()
	if len(line) > 4*MaxAttrBytes {
		t.Fatalf("the log line is %d bytes, want at most %d", len(line), 4*MaxAttrBytes)
	}
	var rec map[string]string
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"msg", "description", "error"} {
		v := rec[k]
		if len(v) > MaxAttrBytes || !utf8.ValidString(v) || !strings.HasSuffix(v, " bytes cut]") || !strings.HasPrefix(v, "éé") {
			t.Errorf("%s = %q (%d bytes), want a valid UTF-8 prefix of at most %d bytes saying what was cut", k, v[:min(len(v), 40)], len(v), MaxAttrBytes)
		}
	}
	if rec["short"] != "kept as it is" {
		t.Errorf("short = %q", rec["short"])
	}
	if got := Truncate(strings.Repeat("a", MaxAttrBytes)); len(got) != MaxAttrBytes || strings.Contains(got, "cut") {
		t.Errorf("Truncate of exactly MaxAttrBytes changed it: %q", got)
	}
}
