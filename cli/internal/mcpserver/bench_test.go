package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"
)

// listTokens returns the bytes and o200k tokens of a profile's tools/list payload, as a client
// receives it over the real transport.
func listTokens(tb testing.TB, h *harness, enc tokenizer.Codec) (int, int) {
	res, err := h.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(res.Tools)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := enc.Count(string(raw))
	if err != nil {
		tb.Fatal(err)
	}
	return len(raw), n
}

// schemaTokenBudget is the o200k token target of the fail-open tools/list (all 63 tools).
const schemaTokenBudget = 7000

// TestSchemaTokenBudget holds the target BenchmarkSchemaTokens reports: every schema byte is
// paid by every model request of every agent.
func TestSchemaTokenBudget(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "")
	if _, tokens := listTokens(t, h, enc); tokens > schemaTokenBudget {
		t.Errorf("fail-open tools/list = %d o200k tokens, over the %d budget", tokens, schemaTokenBudget)
	}
}

// BenchmarkSchemaTokens prints the tools/list size of every profile in bytes and o200k tokens
// and as a ratio to fail-open. Target: fail-open (all 63) <= schemaTokenBudget.
func BenchmarkSchemaTokens(b *testing.B) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	profiles := []string{"", "implement", "review", "triage", "brainstorm", "lifecycle", "incident", "selfImprove"}
	type row struct {
		profile              string
		tools, bytes, tokens int
	}
	var rows []row
	for range b.N {
		rows = rows[:0]
		for _, p := range profiles {
			h := newHarness(b, p)
			by, tok := listTokens(b, h, enc)
			rows = append(rows, row{p, len(h.srv.Tools), by, tok})
		}
	}
	all := rows[0]
	for _, r := range rows {
		name := r.profile
		if name == "" {
			name = "all(fail-open)"
		}
		b.Logf("%-15s tools=%2d bytes=%6d tokens=%5d ratio=%.2f tokens/tool=%.0f", name, r.tools, r.bytes, r.tokens,
			float64(r.tokens)/float64(all.tokens), float64(r.tokens)/float64(r.tools))
	}
	b.ReportMetric(float64(all.tokens), "tokens(all)")
	b.ReportMetric(float64(all.tokens)/float64(all.tools), "tokens/tool")
}

// BenchmarkProxiedCallLatency compares a tool call through the MCP server (streamable HTTP)
// with a direct HTTP call to the same backend, interleaved in one run, and reports the p50
// ratio. An idle loopback backend answers in tens of microseconds, so the ratio there is the
// MCP hop's fixed cost; the delayed backends show the ratio against backends that do work.
func BenchmarkProxiedCallLatency(b *testing.B) {
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		b.Run("backend="+delay.String(), func(b *testing.B) {
			h := newHarness(b, "implement")
			h.backend.delay = delay
			direct := h.backend.servers["memory"].URL + "/code-graph/stats?repo=r"
			samples := 300
			if delay > 0 {
				samples = 100
			}
			var viaMCP, viaHTTP []time.Duration
			for range b.N {
				viaMCP, viaHTTP = viaMCP[:0], viaHTTP[:0]
				for range samples {
					start := time.Now()
					resp, err := http.Get(direct)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					viaHTTP = append(viaHTTP, time.Since(start))

					start = time.Now()
					if res := h.call(b, "code_stats", map[string]any{"repo": "r"}); res.IsError {
						b.Fatal(resultText(res))
					}
					viaMCP = append(viaMCP, time.Since(start))
				}
				h.backend.take()
			}
			ratio := float64(p50(viaMCP)) / float64(p50(viaHTTP))
			b.Logf("backend delay %v: p50 direct=%v via MCP=%v (+%v) ratio=%.2f (target <= 1.5)",
				delay, p50(viaHTTP), p50(viaMCP), p50(viaMCP)-p50(viaHTTP), ratio)
			b.ReportMetric(ratio, "p50-ratio")
		})
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
