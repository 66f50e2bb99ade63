package modelgateway

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkGatewayOverhead streams the same answer (a message of 100 text deltas, each flushed)
// straight from the upstream and through the gateway, alternately, in one process on loopback,
// and reports both paths' time to the first byte and to the whole response, their ratios and
// the gateway's added time per request. ns/op is one request each way.
func BenchmarkGatewayOverhead(b *testing.B) {
	evs := messageStream("claude-bench", apiUsage{InputTokens: 1000, CacheReadInputTokens: 20000}, 100)
	deltas := make([]sse, 0, 100)
	for i := range 100 {
		deltas = append(deltas, sse{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token %d of the answer "}}`, i)})
	}
	evs = slices.Concat(evs[:4], deltas, evs[4:])
	f := newFixture(b, Config{})
	f.up.setAnswer(streamAnswer(evs))
	direct := f.gw.upstream.JoinPath(PathMessages).String() + "?beta=true"
	via := f.url + PathMessages + "?beta=true"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	const reqBody = `{"model":"claude-x","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

	measure := func(url string) (ttfb, full time.Duration) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(reqBody))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var one [1]byte
		if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
			b.Fatal(err)
		}
		ttfb = time.Since(start)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		return ttfb, time.Since(start)
	}
	var n int
	var directTTFB, directFull, viaTTFB, viaFull time.Duration
	for b.Loop() {
		t, d := measure(direct)
		directTTFB, directFull = directTTFB+t, directFull+d
		t, d = measure(via)
		viaTTFB, viaFull = viaTTFB+t, viaFull+d
		n++
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(us(directTTFB), "direct-ttfb-us")
	b.ReportMetric(us(viaTTFB), "gateway-ttfb-us")
	b.ReportMetric(us(directFull), "direct-full-us")
	b.ReportMetric(us(viaFull), "gateway-full-us")
	b.ReportMetric(float64(viaTTFB)/float64(directTTFB), "ttfb-ratio")
	b.ReportMetric(float64(viaFull)/float64(directFull), "full-ratio")
	b.ReportMetric(us(viaFull-directFull), "overhead-us/req")
	if err := f.gw.Wait(b.Context()); err != nil {
		b.Fatal(err)
	}
	if u := f.gw.Usage(); u.OutputTokens != int64(n)*100 {
		b.Errorf("the gateway metered %d output tokens over %d requests, want 100 each", u.OutputTokens, n)
	}
}
