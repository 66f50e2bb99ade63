package mcpserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// boundsServer serves the MCP endpoint of a server with the given transport config.
func boundsServer(t *testing.T, cfg HTTPConfig) (url string, h *HTTPHandler) {
	t.Helper()
	srv := newHarness(t, "implement").srv
	h = srv.NewHTTPHandler(cfg)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", h
}

func post(t testing.TB, url, session, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(server.HeaderKeySessionID, session)
		req.Header.Set(mcp.HeaderProtocolVersion, sessionRevision)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(server.HeaderKeySessionID)
}

// sessionRevision is the latest MCP revision with sessions (2026-07-28 removed them).
const sessionRevision = "2025-11-25"

var initializeBody = fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, sessionRevision)

const pingBody = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

func initialize(t testing.TB, url string) string {
	t.Helper()
	status, id := post(t, url, "", initializeBody)
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q", status, id)
	}
	return id
}

// TestSessionsAreBounded: past MaxSessions live sessions, each initialize ends the session used
// least recently: its client gets 404 (and initializes again), a session in use stays.
func TestSessionsAreBounded(t *testing.T) {
	url, h := boundsServer(t, HTTPConfig{MaxSessions: 4})
	kept := initialize(t, url)
	var ids []string
	for range 9 {
		ids = append(ids, initialize(t, url))
		if status, _ := post(t, url, kept, pingBody); status != http.StatusOK { // kept stays the most recently used
			t.Fatalf("ping on the session in use: status %d", status)
		}
	}
	if n := h.sessions.Len(); n != 4 {
		t.Errorf("%d live sessions, want the bound of 4", n)
	}
	for i, id := range ids {
		want := http.StatusNotFound
		if i >= len(ids)-3 {
			want = http.StatusOK
		}
		if status, _ := post(t, url, id, pingBody); status != want {
			t.Errorf("session %d of 9: ping status %d, want %d", i+1, status, want)
		}
	}
}

// TestSessionFloodMemoryIsBounded: 5,000 initialize calls hold the cli's heap to what the bound
// of live sessions costs. Without the bound (mcp-go keeps every session), the heap grows by about
// 10 KB a session, ~45 MiB here.
func TestSessionFloodMemoryIsBounded(t *testing.T) {
	url, h := boundsServer(t, HTTPConfig{})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range 2 * DefaultMaxSessions { // fill the bound first
		initialize(t, url)
	}
	before := heap()
	const flood = 5000
	for range flood {
		initialize(t, url)
	}
	grew := int64(heap()) - int64(before)
	t.Logf("heap grew %d KiB over %d initialize calls past the bound (%d live sessions)", grew>>10, flood, h.sessions.Len())
	if h.sessions.Len() != DefaultMaxSessions {
		t.Errorf("%d live sessions, want %d", h.sessions.Len(), DefaultMaxSessions)
	}
	if grew > 8<<20 {
		t.Errorf("heap grew %d MiB over %d initialize calls: sessions past the bound are kept", grew>>20, flood)
	}
}

// TestInFlightBodiesAreBounded: a request whose body does not fit beside those in flight waits
// for room; it is answered once the first is done.
func TestInFlightBodiesAreBounded(t *testing.T) {
	url, h := boundsServer(t, HTTPConfig{MaxBodyBytes: 1 << 10, MaxInFlightBytes: 1 << 10})
	// until polls cond (which may fail the test) until it holds.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting until %s", what)
			}
		}
	}
	// free reports whether n bytes of room could be taken now (none are kept).
	free := func(n int64) bool {
		if !h.inFlight.TryAcquire(n) {
			return false
		}
		h.inFlight.Release(n)
		return true
	}
	// The first request declares 600 bytes and sends them slowly: its room is held meanwhile.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() }) // else a failed test hangs closing the server
	slow, err := http.NewRequest(http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	slow.ContentLength = 600
	slow.Header.Set("Content-Type", "application/json")
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		if resp, err := http.DefaultClient.Do(slow); err == nil {
			_ = resp.Body.Close()
		}
	}()
	if _, err := pw.Write(bytes.Repeat([]byte(" "), 100)); err != nil {
		t.Fatal(err)
	}
	// The write only shows the client read the pipe: wait until the server holds the room.
	until("the first request holds its 600 bytes", func() bool { return !free(1<<10 - 600 + 1) })
	second := make(chan int, 1)
	go func() {
		body := initializeBody + strings.Repeat(" ", 600-len(initializeBody))
		status, _ := post(t, url, "", body)
		second <- status
	}()
	// With 424 bytes free, even 1 byte cannot be taken only while a request waits for room
	// (the semaphore serves waiters first): the second request is then blocked.
	until("the second request waits for room", func() bool {
		select {
		case status := <-second:
			t.Fatalf("the second 600-byte request was answered (%d) while the first held 600 of 1024 bytes", status)
		default:
		}
		return !free(1)
	})
	_, _ = pw.Write(append([]byte(initializeBody), bytes.Repeat([]byte(" "), 500-len(initializeBody))...))
	_ = pw.Close()
	<-slowDone
	select {
	case status := <-second:
		if status != http.StatusOK {
			t.Errorf("the second request, once room was free: status %d, want 200", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second request was never answered after the first finished")
	}
}
