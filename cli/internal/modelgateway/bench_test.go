package modelgateway

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchRequests is how many requests each path of BenchmarkGatewayOverhead sends per run: enough
// for a p99, whatever -benchtime says.
const benchRequests = 300

const benchBody = `{"model":"claude-x","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// benchStream is a message of 100 text deltas, each flushed.
func benchStream() []sse {
	evs := messageStream("claude-bench", apiUsage{InputTokens: 1000, CacheReadInputTokens: 20000}, 100)
	deltas := make([]sse, 0, 100)
	for i := range 100 {
		deltas = append(deltas, sse{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token %d of the answer "}}`, i)})
	}
	return slices.Concat(evs[:4], deltas, evs[4:])
}

// BenchmarkGatewayOverhead streams the same answer straight from the upstream and through the
// gateway, alternately, benchRequests times each, in one process on loopback, and reports each
// path's p50 and p99 time to the first byte and to the whole response, and the p50 and p99 of what
// the gateway added to a request (its time minus the direct request's just before it). These
// machines are shared: the figures are ratios and differences within one run, never compared with
// a fixed time.
func BenchmarkGatewayOverhead(b *testing.B) {
	f := newFixture(b, Config{})
	f.up.setAnswer(streamAnswer(benchStream()))
	direct := f.gw.upstream.JoinPath(PathMessages).String() + "?beta=true"
	via := f.url + PathMessages + "?beta=true"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	measure := func(url string) (ttfb, full time.Duration) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(benchBody))
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
	var directTTFB, directFull, viaTTFB, viaFull, addedTTFB, addedFull []time.Duration
	for b.Loop() {
		for range benchRequests {
			dt, df := measure(direct)
			vt, vf := measure(via)
			directTTFB, directFull = append(directTTFB, dt), append(directFull, df)
			viaTTFB, viaFull = append(viaTTFB, vt), append(viaFull, vf)
			addedTTFB, addedFull = append(addedTTFB, vt-dt), append(addedFull, vf-df)
		}
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"direct-ttfb", directTTFB}, {"gateway-ttfb", viaTTFB}, {"direct-full", directFull}, {"gateway-full", viaFull},
		{"added-ttfb", addedTTFB}, {"added-full", addedFull}} {
		b.ReportMetric(percentileMs(m.d, 50), m.name+"-p50-ms")
		b.ReportMetric(percentileMs(m.d, 99), m.name+"-p99-ms")
	}
	b.ReportMetric(percentileMs(viaFull, 99)/percentileMs(directFull, 99), "full-p99-ratio")
	if err := f.gw.Wait(b.Context()); err != nil {
		b.Fatal(err)
	}
	if u := f.gw.Usage(); u.OutputTokens != int64(len(viaFull))*100 {
		b.Errorf("the gateway metered %d output tokens over %d requests, want 100 each", u.OutputTokens, len(viaFull))
	}
}

func percentileMs(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return float64(s[max(0, i)].Microseconds()) / 1000
}

// BenchmarkGatewayMemoryWith100Streams holds 100 streams open at once, each past its first event
// and waiting for the rest, first straight to the upstream and then through the gateway, and
// reports the heap in use with them open each way: the difference is what the gateway holds per
// stream (its line buffer is bounded, and nothing buffers a response).
func BenchmarkGatewayMemoryWith100Streams(b *testing.B) {
	const streams = 100
	evs := benchStream()
	f := newFixture(b, Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0}}
	// heapWith opens streams to url, each held by the upstream after its first event, and returns
	// the heap in use while all are open.
	heapWith := func(url string) uint64 {
		release := make(chan struct{})
		f.up.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, evs[0].String())
			w.(http.Flusher).Flush()
			<-release
			for _, e := range evs[1:] {
				_, _ = io.WriteString(w, e.String())
			}
		})
		var open, done sync.WaitGroup
		open.Add(streams)
		done.Add(streams)
		for range streams {
			go func() {
				defer done.Done()
				resp, err := client.Post(url, "application/json", strings.NewReader(benchBody))
				if err != nil {
					open.Done()
					b.Error(err)
					return
				}
				defer func() { _ = resp.Body.Close() }()
				var one [1]byte
				_, err = io.ReadFull(resp.Body, one[:])
				open.Done()
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
			}()
		}
		open.Wait()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		close(release)
		done.Wait()
		return ms.HeapInuse
	}
	var direct, via uint64
	for b.Loop() {
		direct = heapWith(f.gw.upstream.JoinPath(PathMessages).String())
		via = heapWith(f.url + PathMessages)
	}
	b.ReportMetric(float64(direct)/(1<<20), "direct-heap-MiB")
	b.ReportMetric(float64(via)/(1<<20), "gateway-heap-MiB")
	b.ReportMetric((float64(via)-float64(direct))/streams/1024, "gateway-KiB/stream")
}
