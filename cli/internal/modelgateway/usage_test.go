package modelgateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/pkg/modelusage"
)

// Each event of a stream reaches the agent before the upstream writes the next: the upstream
// waits, after each event, until the test has read it through the gateway.
func TestStreamPassesEventByEvent(t *testing.T) {
	f := newFixture(t, Config{})
	evs := messageStream("claude-test-1", apiUsage{InputTokens: 7, CacheReadInputTokens: 5}, 2, 9)
	next := make(chan struct{})
	f.up.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range evs {
			_, _ = io.WriteString(w, e.String())
			w.(http.Flusher).Flush()
			select {
			case <-next: // the test has read this event through the gateway
			case <-r.Context().Done():
				return
			}
		}
	})
	resp, err := http.Post(f.url+PathMessages+"?beta=true", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	type event struct {
		text string
		err  error
	}
	events := make(chan event)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			var b strings.Builder
			for {
				line, err := br.ReadString('\n')
				b.WriteString(line)
				if err != nil {
					events <- event{b.String(), err}
					return
				}
				if line == "\n" {
					break
				}
			}
			events <- event{b.String(), nil}
		}
	}()
	for i, want := range evs {
		// The upstream cannot write event i+1 until this one is read: a gateway that held the
		// stream back would never deliver it. The timeout only turns that hang into a failure.
		select {
		case got := <-events:
			if got.err != nil || got.text != want.String() {
				t.Fatalf("event %d = %q (%v), want %q", i, got.text, got.err, want.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("event %d (%s) did not come through before the upstream wrote the next: the gateway holds the stream back", i, want.event)
		}
		next <- struct{}{}
	}
	if got := <-events; !errors.Is(got.err, io.EOF) || got.text != "" {
		t.Errorf("after the last event: %q, %v; want EOF", got.text, got.err)
	}
	_ = resp.Body.Close()
	// The response is counted once the handler is done with it.
	if err := f.gw.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := modelusage.Usage{Requests: 1, InputTokens: 7, OutputTokens: 9, CacheReadInputTokens: 5}
	if got := f.gw.Usage(); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

// An agent that hangs up before a stream ends still has its output counted: the gateway reads
// on, for DrainGrace, to the final message_delta, which the upstream here sends only once the
// gateway has seen the agent go, after more text (the proxy stops copying at its first failed
// write to the agent) or none (an agent hanging up as the text ends, the answer complete).
func TestHangingUpDoesNotEscapeTheOutputCount(t *testing.T) {
	for _, moreText := range []int{0, 50} {
		t.Run(fmt.Sprintf("%d more deltas", moreText), func(t *testing.T) {
			f := newFixture(t, Config{})
			agentGone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				context.AfterFunc(r.Context(), func() { close(agentGone) })
				f.gw.ServeHTTP(w, r)
			}))
			defer srv.Close()
			evs := messageStream("claude-hangup", apiUsage{InputTokens: 5}, 400)
			read, rest := evs[:4], evs[4:] // up to the first text delta; the rest after the hang-up
			for range moreText {
				rest = append([]sse{evs[3]}, rest...)
			}
			f.up.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
				streamAnswer(read)(w, nil)
				<-agentGone
				streamAnswer(rest)(w, nil)
			})
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Post(srv.URL+PathMessages, "application/json", strings.NewReader(`{"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for _, e := range read {
				want += e.String()
			}
			got := make([]byte, len(want))
			if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != want {
				t.Fatalf("read %q (%v), want the first events", got, err)
			}
			_ = resp.Body.Close() // before the end: the connection goes
			if err := f.gw.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if u := f.gw.Usage(); u.OutputTokens != 400 || u.InputTokens != 5 {
				t.Errorf("usage %+v, want the 400 output tokens of the final message_delta", u)
			}
		})
	}
}

// The tokens each kind of response reports, as the gateway counts them.
func TestUsageIsMetered(t *testing.T) {
	stream := func(evs ...sse) http.HandlerFunc { return streamAnswer(evs) }
	crlf := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range messageStream("claude-crlf", apiUsage{InputTokens: 4}, 6) {
			_, _ = io.WriteString(w, strings.ReplaceAll(e.String(), "\n", "\r\n"))
		}
	}
	tests := []struct {
		name   string
		path   string
		answer http.HandlerFunc
		code   int
		model  string // the model label
		want   apiUsage
	}{
		{name: "stream with cumulative output deltas", answer: streamAnswer(messageStream("claude-sonnet-x", apiUsage{InputTokens: 100, CacheCreationInputTokens: 20, CacheReadInputTokens: 300}, 5, 12, 30)),
			code: 200, model: "claude-sonnet-x", want: apiUsage{InputTokens: 100, OutputTokens: 30, CacheCreationInputTokens: 20, CacheReadInputTokens: 300}},
		{name: "stream whose delta repeats the input counts", answer: stream(
			sse{"message_start", `{"type":"message_start","message":{"model":"claude-opus-x","usage":{"input_tokens":50,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"output_tokens":1}}}`},
			sse{"message_delta", `{"type":"message_delta","usage":{"input_tokens":50,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"output_tokens":8}}`},
			sse{"message_delta", `{"type":"message_delta","usage":{"input_tokens":50,"cache_read_input_tokens":10,"output_tokens":21}}`},
			sse{"message_stop", `{"type":"message_stop"}`}),
			code: 200, model: "claude-opus-x", want: apiUsage{InputTokens: 50, OutputTokens: 21, CacheReadInputTokens: 10}},
		{name: "stream with CRLF lines", answer: crlf, code: 200, model: "claude-crlf", want: apiUsage{InputTokens: 4, OutputTokens: 6}},
		{name: "stream cut before its message_delta", answer: stream(messageStream("claude-cut", apiUsage{InputTokens: 9})[:3]...),
			code: 200, model: "claude-cut", want: apiUsage{InputTokens: 9, OutputTokens: 1}},
		{name: "stream with an error event", answer: stream(sse{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}),
			code: 200, model: modelNone},
		{name: "content that quotes the event names", answer: stream(
			sse{"message_start", `{"type":"message_start","message":{"model":"claude-q","usage":{"input_tokens":3,"output_tokens":1}}}`},
			sse{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":999999}}"}}`},
			sse{"message_delta", `{"type":"message_delta","usage":{"output_tokens":4}}`}),
			code: 200, model: "claude-q", want: apiUsage{InputTokens: 3, OutputTokens: 4}},
		{name: "JSON message", answer: jsonAnswer(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-x","content":[{"type":"text","text":"hi"}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":11,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":4}}`),
			code: 200, model: "claude-haiku-x", want: apiUsage{InputTokens: 11, OutputTokens: 4, CacheCreationInputTokens: 2, CacheReadInputTokens: 3}},
		{name: "count_tokens answer uses no tokens", path: PathCountTokens, answer: jsonAnswer(200, `{"input_tokens":1234}`), code: 200, model: modelNone},
		{name: "error", answer: jsonAnswer(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), code: 529, model: modelNone},
		{name: "not JSON", answer: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "plain") }, code: 200, model: modelNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{TaskKind: "implement", Profile: "implement"})
			f.up.setAnswer(tt.answer)
			path := tt.path
			if path == "" {
				path = PathMessages
			}
			if res := f.post(t, path); res.code != tt.code {
				t.Fatalf("answer %d %s, want %d", res.code, res.body, tt.code)
			}
			if err := f.gw.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := modelusage.Usage{Requests: 1, InputTokens: tt.want.InputTokens, OutputTokens: tt.want.OutputTokens,
				CacheCreationInputTokens: tt.want.CacheCreationInputTokens, CacheReadInputTokens: tt.want.CacheReadInputTokens}
			if got := f.gw.Usage(); got != want {
				t.Errorf("usage %+v, want %+v", got, want)
			}
			if got := promtest.ToFloat64(f.gw.metrics.requests.WithLabelValues(tt.model, fmt.Sprint(tt.code))); got != 1 {
				t.Errorf("tatara_model_requests_total{model=%q,code=%d} = %v, want 1", tt.model, tt.code, got)
			}
			if tt.model != modelNone {
				for typ, n := range map[string]int64{TokensInput: tt.want.InputTokens, TokensOutput: tt.want.OutputTokens,
					TokensCacheCreation: tt.want.CacheCreationInputTokens, TokensCacheRead: tt.want.CacheReadInputTokens} {
					if got := promtest.ToFloat64(f.gw.metrics.tokens.WithLabelValues(tt.model, typ)); got != float64(n) {
						t.Errorf("tatara_model_tokens_total{model=%q,type=%q} = %v, want %d", tt.model, typ, got, n)
					}
				}
			}
		})
	}
}

// The meter reads a stream the same whatever the chunks it comes in, and skips a line too long
// to hold.
func TestSSEMeterChunking(t *testing.T) {
	var b strings.Builder
	for _, e := range messageStream("claude-chunks", apiUsage{InputTokens: 42, CacheCreationInputTokens: 8}, 3, 17) {
		b.WriteString(e.String())
	}
	long := `data: {"type":"content_block_delta","delta":{"text":"` + strings.Repeat("x", maxLineBytes) + `"}}` + "\n\n"
	stream := long + b.String()
	want := reading{model: "claude-chunks", usage: apiUsage{InputTokens: 42, OutputTokens: 17, CacheCreationInputTokens: 8}}
	for _, size := range []int{1, 2, 3, 7, 64, 4096, len(stream)} {
		m := &sseMeter{}
		for s := stream; len(s) > 0; {
			n := min(size, len(s))
			m.write([]byte(s[:n]))
			s = s[n:]
		}
		if got := m.result(); got != want {
			t.Errorf("chunks of %d bytes: %+v, want %+v", size, got, want)
		}
		if cap(m.line) > maxLineBytes {
			t.Errorf("chunks of %d bytes: the line buffer grew to %d bytes, bound %d", size, cap(m.line), maxLineBytes)
		}
	}
}

// The usage file holds the pod's totals from the start and after every response, in the
// format the operator parses, and never carries old bytes past its end.
func TestUsageFileAfterEveryResponse(t *testing.T) {
	path := t.TempDir() + "/termination-log"
	// What a previous writer left, longer than any report: cut, not kept after the report.
	if err := os.WriteFile(path, []byte(strings.Repeat("stale ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{UsageFile: path})
	read := func() modelusage.Usage {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		u, err := modelusage.Parse(string(raw))
		if err != nil {
			t.Fatalf("usage file %q: %v", raw, err)
		}
		return u
	}
	if got := read(); got != (modelusage.Usage{}) {
		t.Errorf("usage file at start: %+v, want zeros", got)
	}
	answers := []struct {
		answer http.HandlerFunc
		want   modelusage.Usage
	}{
		{streamAnswer(messageStream("m", apiUsage{InputTokens: 10, CacheReadInputTokens: 1000}, 20)),
			modelusage.Usage{Requests: 1, InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: 1000}},
		{jsonAnswer(200, `{"model":"m","usage":{"input_tokens":5,"output_tokens":6,"cache_creation_input_tokens":7}}`),
			modelusage.Usage{Requests: 2, InputTokens: 15, OutputTokens: 26, CacheCreationInputTokens: 7, CacheReadInputTokens: 1000}},
		{jsonAnswer(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
			modelusage.Usage{Requests: 3, InputTokens: 15, OutputTokens: 26, CacheCreationInputTokens: 7, CacheReadInputTokens: 1000}},
	}
	for i, a := range answers {
		f.up.setAnswer(a.answer)
		_ = f.post(t, PathMessages)
		if err := f.gw.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != a.want {
			t.Errorf("usage file after response %d: %+v, want %+v", i, got, a.want)
		}
	}
}

// With a budget, a request is refused before forwarding once the Task's tokens (earlier
// attempts' plus this pod's) reach it, in the model API's format and marked not to be retried.
func TestTokenBudget(t *testing.T) {
	tests := []struct {
		name         string
		budget, used int64
		// forwarded is how many requests pass before the refusal (each uses 13 tokens).
		forwarded int
		wantUsed  int64 // in the refusal
	}{
		{name: "earlier attempts spent it", budget: 100, used: 100, forwarded: 0, wantUsed: 100},
		{name: "earlier attempts overspent it", budget: 100, used: 250, forwarded: 0, wantUsed: 250},
		{name: "this pod reaches it exactly", budget: 39, used: 0, forwarded: 3, wantUsed: 39},
		{name: "crossed by a response", budget: 30, used: 10, forwarded: 2, wantUsed: 36},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{TokenBudget: tt.budget, TokensUsed: tt.used})
			for i := range tt.forwarded {
				if res := f.post(t, PathMessages); res.code != http.StatusOK {
					t.Fatalf("request %d under the budget: %d %s", i, res.code, res.body)
				}
			}
			for range 2 { // and every request after
				res := f.post(t, PathMessages)
				checkAPIError(t, res, http.StatusBadRequest, errInvalidRequest,
					fmt.Sprintf("tatara: this Task's token budget of %d tokens is spent (%d used)", tt.budget, tt.wantUsed))
				if got := res.header.Get("X-Should-Retry"); got != "false" {
					t.Errorf("x-should-retry %q, want false", got)
				}
			}
			if n := len(f.up.all()); n != tt.forwarded {
				t.Errorf("%d requests reached the upstream, want %d", n, tt.forwarded)
			}
			if got := promtest.ToFloat64(f.gw.metrics.refusals); got != 2 {
				t.Errorf("tatara_model_budget_refusals_total = %v, want 2", got)
			}
			raw, _ := os.ReadFile(f.usageFile)
			u, err := modelusage.Parse(string(raw))
			if err != nil || !u.BudgetExceeded || u.Requests != int64(tt.forwarded) || u.Tokens() != 13*int64(tt.forwarded) {
				t.Errorf("usage file %s (%v): want budgetExceeded and %d requests of 13 tokens", raw, err, tt.forwarded)
			}
		})
	}
}

// Without a budget, nothing is refused however many tokens pass.
func TestNoBudget(t *testing.T) {
	f := newFixture(t, Config{TokensUsed: 1 << 40})
	for range 3 {
		if res := f.post(t, PathMessages); res.code != http.StatusOK {
			t.Fatalf("%d %s", res.code, res.body)
		}
	}
	raw, _ := os.ReadFile(f.usageFile)
	var u map[string]any
	if err := json.Unmarshal(raw, &u); err != nil || u["budgetExceeded"] != nil {
		t.Errorf("usage file %s: want no budgetExceeded", raw)
	}
}
