package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeBody(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		dst      func() validator
		max      int64
		wantCode int // 0 = success
		wantMsg  string
	}{
		{"valid note", `{"text":"hi"}`, func() validator { return &noteRequest{} }, 1024, 0, ""},
		{"empty body", ``, func() validator { return &noteRequest{} }, 1024, 400, "empty"},
		{"whitespace body", " \n", func() validator { return &noteRequest{} }, 1024, 400, "empty"},
		{"syntax error names the offset", `{"text" "hi"}`, func() validator { return &noteRequest{} }, 1024, 400, "byte offset 9"},
		{"truncated", `{"text":"hi"`, func() validator { return &noteRequest{} }, 1024, 400, "malformed JSON"},
		{"wrong type names the field", `{"text":true}`, func() validator { return &noteRequest{} }, 1024, 400, `field "text" must be a string, got a JSON bool`},
		{"array instead of object", `["hi"]`, func() validator { return &noteRequest{} }, 1024, 400, "must be a JSON object"},
		{"unknown field", `{"text":"a","extra":1}`, func() validator { return &noteRequest{} }, 1024, 400, `unknown field "extra"`},
		{"trailing data", `{"text":"a"} {"text":"b"}`, func() validator { return &noteRequest{} }, 1024, 400, "after the JSON object"},
		{"required field blank", `{"text":"  "}`, func() validator { return &noteRequest{} }, 1024, 400, `field "text" is required`},
		{"over the limit", `{"text":"` + strings.Repeat("a", 100) + `"}`, func() validator { return &noteRequest{} }, 64, 413, "limit of 64 bytes"},
		{"exactly at the limit", `{"text":"` + strings.Repeat("a", 53) + `"}`, func() validator { return &noteRequest{} }, 64, 0, ""},
		{"issue as float", `{"issue":1.5,"body":"b"}`, func() validator { return &issueCommentRequest{} }, 1024, 400, `field "issue" must be an integer`},
		{"issue missing", `{"body":"b"}`, func() validator { return &issueCommentRequest{} }, 1024, 400, `field "issue" is required`},
		{"issue zero", `{"issue":0,"body":"b"}`, func() validator { return &issueCommentRequest{} }, 1024, 400, "positive integer, got 0"},
		{"pr outcome enum", `{"outcome":"won"}`, func() validator { return &prOutcomeRequest{} }, 1024, 400, `field "outcome" is "won": want one of opened, merged, closed, failed`},
		{"pr outcome missing", `{}`, func() validator { return &prOutcomeRequest{} }, 1024, 400, `field "outcome" is required`},
		{"review verdict needs summary", `{"verdict":"approve"}`, func() validator { return &reviewVerdictRequest{} }, 1024, 400, `field "summary"`},
		{"subtask kind enum", `{"kind":"healthCheck","repo":"r","directive":"d"}`, func() validator { return &subtaskCreateRequest{} }, 1024, 400, `field "kind" is "healthCheck"`},
		{"cancel reason optional", `{}`, func() validator { return &subtaskCancelRequest{} }, 1024, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			err := decodeBody(httptest.NewRecorder(), r, tt.max, tt.dst())
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("unexpected error %d %q", err.status, err.msg)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %d, got success", tt.wantCode)
			}
			if err.status != tt.wantCode || !strings.Contains(err.msg, tt.wantMsg) {
				t.Fatalf("got %d %q, want %d containing %q", err.status, err.msg, tt.wantCode, tt.wantMsg)
			}
		})
	}
}
