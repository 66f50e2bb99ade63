package scrapewait

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func scrapeFrom(t *testing.T, h http.Handler, remote string, local net.Addr) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.RemoteAddr = remote
	if local != nil {
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func TestExternal(t *testing.T) {
	podIP := &net.TCPAddr{IP: net.ParseIP("10.244.0.7"), Port: 9091}
	for _, tc := range []struct {
		name, remote string
		local        net.Addr
		want         bool
	}{
		{"prometheus pod", "10.244.0.12:40100", podIP, true},
		{"loopback v4", "127.0.0.1:40100", podIP, false},
		{"loopback v6", "[::1]:40100", podIP, false},
		{"v4-mapped loopback", "[::ffff:127.0.0.1]:40100", podIP, false},
		{"the pod's own address", "10.244.0.7:40100", podIP, false},
		{"the pod's own address, v4-mapped", "[::ffff:10.244.0.7]:40100", podIP, false},
		{"unparsable remote", "not-an-address", podIP, false},
		{"unspecified", "0.0.0.0:1", podIP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.RemoteAddr = tc.remote
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			if got := External(r); got != tc.want {
				t.Errorf("External(%s -> %s) = %v, want %v", tc.remote, tc.local, got, tc.want)
			}
		})
	}
}

func TestWaitEndsOnTheNextExternalScrape(t *testing.T) {
	g := New()
	status := http.StatusOK
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	podIP := &net.TCPAddr{IP: net.ParseIP("10.244.0.7"), Port: 9091}

	// A scrape before Wait does not end it: it may predate the last change.
	scrapeFrom(t, h, "10.244.0.12:1", podIP)
	if g.Wait(context.Background(), 50*time.Millisecond) {
		t.Fatal("Wait returned true with no scrape after it started")
	}

	// The mark is taken here, not in the goroutine: a late goroutine would count the final
	// scrape below as one that started before the wait.
	after := g.mark()
	done := make(chan bool, 1)
	go func() { done <- g.waitAfter(context.Background(), after, time.Minute) }()
	// Neither the agent (loopback, the pod's own address) nor a failed scrape ends the wait.
	scrapeFrom(t, h, "127.0.0.1:1", podIP)
	scrapeFrom(t, h, "10.244.0.7:1", podIP)
	status = http.StatusInternalServerError
	scrapeFrom(t, h, "10.244.0.12:2", podIP)
	select {
	case <-done:
		t.Fatal("Wait ended on a loopback, self or failed scrape")
	case <-time.After(50 * time.Millisecond):
	}
	status = http.StatusOK
	scrapeFrom(t, h, "10.244.0.12:3", podIP)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait returned false after an external scrape")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after an external scrape")
	}
}

func TestWaitBounds(t *testing.T) {
	g := New()
	if g.Wait(context.Background(), 0) {
		t.Error("Wait(0) = true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.Wait(ctx, time.Hour) {
		t.Error("Wait with a cancelled context = true")
	}
}
