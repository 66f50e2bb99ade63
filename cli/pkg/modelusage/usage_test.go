package modelusage_test

import (
	"encoding/json"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/modelusage"
)

func TestTokensAndAdd(t *testing.T) {
	a := modelusage.Usage{Requests: 2, InputTokens: 10, OutputTokens: 20, CacheCreationInputTokens: 30, CacheReadInputTokens: 40}
	b := modelusage.Usage{Requests: 1, InputTokens: 1, OutputTokens: 2, CacheCreationInputTokens: 3, CacheReadInputTokens: 4, BudgetExceeded: true}
	if got := a.Tokens(); got != 100 {
		t.Errorf("Tokens() = %d, want 100 (every type counts)", got)
	}
	want := modelusage.Usage{Requests: 3, InputTokens: 11, OutputTokens: 22, CacheCreationInputTokens: 33, CacheReadInputTokens: 44, BudgetExceeded: true}
	for _, got := range []modelusage.Usage{a.Add(b), b.Add(a)} {
		if got != want {
			t.Errorf("Add = %+v, want %+v", got, want)
		}
	}
	if got := a.Add(modelusage.Usage{}); got != a {
		t.Errorf("Add of nothing = %+v, want %+v", got, a)
	}
}

// The termination message round-trips, and Parse refuses what must not lower a Task's use.
func TestParse(t *testing.T) {
	full := modelusage.Usage{Requests: 3, InputTokens: 11, OutputTokens: 22, CacheCreationInputTokens: 33, CacheReadInputTokens: 44, BudgetExceeded: true}
	raw, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		message string
		want    modelusage.Usage
		wantErr string
	}{
		{name: "round trip", message: string(raw), want: full},
		{name: "field names", message: `{"requests":1,"inputTokens":2,"outputTokens":3,"cacheCreationInputTokens":4,"cacheReadInputTokens":5}`,
			want: modelusage.Usage{Requests: 1, InputTokens: 2, OutputTokens: 3, CacheCreationInputTokens: 4, CacheReadInputTokens: 5}},
		{name: "empty object", message: `{}`},
		{name: "unknown fields ignored", message: `{"requests":1,"future":true}`, want: modelusage.Usage{Requests: 1}},
		{name: "negative count", message: `{"outputTokens":-5}`, wantErr: "outputTokens is -5, want >= 0"},
		{name: "negative requests", message: `{"requests":-1}`, wantErr: "requests is -1"},
		{name: "not JSON", message: `requests=1`, wantErr: "invalid model usage"},
		{name: "empty", message: ``, wantErr: "invalid model usage"},
		{name: "count not an integer", message: `{"inputTokens":1.5}`, wantErr: "invalid model usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modelusage.Parse(tt.message)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %+v, %v; want an error with %q", tt.message, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tt.message, got, err, tt.want)
			}
		})
	}
	// The report of a busy pod stays far below the kubelet's 4 KiB bound on a termination message.
	const big = int64(1) << 62
	if raw, _ := json.Marshal(modelusage.Usage{Requests: big, InputTokens: big, OutputTokens: big, CacheCreationInputTokens: big, CacheReadInputTokens: big, BudgetExceeded: true}); len(raw) > 512 {
		t.Errorf("a report of the largest counts is %d bytes", len(raw))
	}
}
