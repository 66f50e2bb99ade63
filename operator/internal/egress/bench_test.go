package egress

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkConnectTTFB is the time to the first byte of an HTTPS GET on a new connection (TCP,
// TLS handshake, request) through a CONNECT tunnel of the proxy, against the same GET made
// directly in the same run, alternating so that both see the same machine. It reports the
// ratio and the microseconds the proxy adds (a lookup in the fake resolver, the checks, one
// more dial and the copy), not absolute times, which say more about the machine.
//
//	go test -run '^$' -bench BenchmarkConnectTTFB ./internal/egress/
func BenchmarkConnectTTFB(b *testing.B) {
	up := startUpstream(b, true)
	h := startProxy(b, Config{
		Policy: policyFor(b, fmt.Sprintf("allowed.test:%d", up.port)), Resolver: mapResolver{"allowed.test": {localhost}},
		Forbidden: loopbackPermitted(), Identify: fakeIdentities{localhost: agentA},
	})
	proxied, direct := clientVia(h.addr, up), clientVia("", up)
	direct.Transport.(*http.Transport).Proxy = nil
	proxiedURL := fmt.Sprintf("https://allowed.test:%d/", up.port)
	directURL := fmt.Sprintf("https://127.0.0.1:%d/", up.port)
	ttfb := func(c *http.Client, u string) time.Duration {
		start := time.Now()
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return d
	}
	var viaProxy, viaDirect time.Duration
	n := 0
	for b.Loop() {
		viaProxy += ttfb(proxied, proxiedURL)
		viaDirect += ttfb(direct, directURL)
		n++
	}
	b.ReportMetric(float64(viaProxy)/float64(viaDirect), "ratio_vs_direct")
	b.ReportMetric(float64(viaProxy-viaDirect)/float64(n)/1e3, "added_µs/op")
	b.ReportMetric(float64(viaDirect)/float64(n)/1e3, "direct_µs/op")
}
