package connlimit

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestPerSource: a source holds at most max connections; the next is closed unread and counted,
// and closing one of its connections gives the place back.
func TestPerSource(t *testing.T) {
	base, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ln := PerSource(base, 2, func() { refused.Add(1) })
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", base.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	dial()
	dial()
	first := <-accepted
	<-accepted
	over := dial()
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a third connection from one source: read %v, want EOF", err)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	// Closing twice gives back one place only.
	_ = first.Close()
	_ = first.Close()
	dial()
	<-accepted
	over = dial()
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a connection past the cap after one place was given back: read %v, want EOF", err)
	}
	if n := refused.Load(); n != 2 {
		t.Errorf("refused %d, want 2", n)
	}
}
