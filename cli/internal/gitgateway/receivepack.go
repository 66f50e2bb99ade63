package gitgateway

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// A push: its body read within the limit, its commands checked, then proxied or refused.

// reqState is what a request's handling learns that the proxy's error handler needs.
type reqState struct{ tooLarge atomic.Bool }

type stateKey struct{}

// limitedBody reads through an http.MaxBytesReader and remembers when the limit was hit.
type limitedBody struct {
	r  io.Reader
	st *reqState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		b.st.tooLarge.Store(true)
	}
	return n, err
}

// body is a request body made of a reader and the original body's closer.
type body struct {
	io.Reader
	io.Closer
}

// serveReceivePack checks a push's command list and forwards the push only if every ref update
// is allowed to target.
func (h *handler) serveReceivePack(w http.ResponseWriter, r *http.Request, st *reqState, target *pushTarget) {
	raw := &limitedBody{r: http.MaxBytesReader(w, r.Body, h.maxBytes), st: st}
	src := io.Reader(raw)
	gzipped := false
	switch enc := r.Header.Values("Content-Encoding"); {
	case len(enc) == 0:
	case len(enc) == 1 && (strings.EqualFold(enc[0], "gzip") || strings.EqualFold(enc[0], "x-gzip")):
		zr, err := gzip.NewReader(src)
		if err != nil {
			h.refuse(w, raw, http.StatusBadRequest, fmt.Sprintf("invalid push request: the gzip body does not decompress: %v", err), nil)
			return
		}
		src = &limitedBody{r: http.MaxBytesReader(w, zr, h.maxBytes), st: st}
		gzipped = true
	default:
		h.refuse(w, raw, http.StatusUnsupportedMediaType, fmt.Sprintf("invalid push request: Content-Encoding %q is not supported (gzip or none)", strings.Join(enc, ", ")), nil)
		return
	}

	push, prefix, err := readCommands(src)
	if err != nil {
		var pe *protocolError
		if errors.As(err, &pe) || st.tooLarge.Load() {
			h.refuse(w, raw, http.StatusBadRequest, err.Error(), nil)
			return
		}
		h.log.Warn("git push not forwarded: failed to read the request", "error", err.Error())
		textError(w, http.StatusBadRequest, "failed to read the push request\n")
		return
	}
	if refusals := h.check(push, target); len(refusals) > 0 {
		if (push.hasCapability("report-status") || push.hasCapability("report-status-v2")) && !push.PushCert {
			h.reportRefused(w, raw, push, refusals)
			return
		}
		h.refuse(w, raw, http.StatusForbidden, joinReasons(refusals), push.Commands)
		return
	}
	if len(push.Commands) == 0 {
		// git sends a bare flush-pkt to probe before a large push; the upstream updates nothing.
		h.log.Debug("forwarding a receive-pack request without ref updates")
	} else {
		h.pushes.WithLabelValues(OutcomeAccepted).Inc()
		h.log.Info("git push accepted", "refs", push.refs(), "updates", commandStrings(push.Commands), "gzip", gzipped)
	}
	out := r.Clone(r.Context())
	out.Body = body{io.MultiReader(bytes.NewReader(prefix), src), r.Body}
	if gzipped {
		out.Header.Del("Content-Encoding")
		out.Header.Del("Content-Length")
		out.ContentLength = -1
	}
	h.proxy.ServeHTTP(w, out)
}
