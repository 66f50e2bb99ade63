package gitgateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// A refused push is answered the way git itself reports a refused ref, so the agent's git prints why.

// reportRefused answers a refused push the way receive-pack reports rejected refs (HTTP 200 with a
// report-status naming each ref "ng" and why), so git shows the agent
// "! [remote rejected] <ref> (<reason>)" and exits non-zero, instead of a bare "HTTP 403" whose
// body git does not print. Nothing is forwarded; every ref of the push is reported, since the
// whole push is refused.
func (h *handler) reportRefused(w http.ResponseWriter, raw *limitedBody, push *pushRequest, refusals []refusal) {
	if raw.st.tooLarge.Load() {
		h.refuse(w, raw, http.StatusRequestEntityTooLarge, "", push.Commands)
		return
	}
	_, _ = io.Copy(io.Discard, raw)
	whole, perRef := "", map[string]string{}
	for _, r := range refusals {
		if r.ref == "" {
			whole = r.reason
		} else if perRef[r.ref] == "" {
			perRef[r.ref] = r.reason
		}
	}
	var report bytes.Buffer
	writePktLine(&report, "unpack ok\n")
	for _, c := range push.Commands {
		reason := perRef[c.Ref]
		switch {
		case reason != "":
		case whole != "":
			reason = whole
		default:
			reason = "not pushed: another ref of this push was refused"
		}
		writePktLine(&report, "ng "+c.Ref+" "+strings.ReplaceAll(reason, "\n", " ")+"\n")
	}
	report.WriteString("0000")
	body := report.Bytes()
	// With a side band, the report travels in band 1 (the client asked for one when it lists it).
	if band := sideBandSize(push); band > 0 {
		var framed bytes.Buffer
		for len(body) > 0 {
			n := min(len(body), band)
			writePktLine(&framed, "\x01"+string(body[:n]))
			body = body[n:]
		}
		framed.WriteString("0000")
		body = framed.Bytes()
	}
	h.pushes.WithLabelValues(OutcomeRefused).Inc()
	h.log.Warn("git push refused", "status", http.StatusOK, "reason", joinReasons(refusals), "refs", push.refs(), "updates", commandStrings(push.Commands))
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// sideBandSize is the most data one side-band packet carries for the push's capabilities, or 0
// without a side band (pkt-line lengths less the 4-byte header and the band byte).
func sideBandSize(push *pushRequest) int {
	switch {
	case push.hasCapability("side-band-64k"):
		return 65520 - 5
	case push.hasCapability("side-band"):
		return 1000 - 5
	}
	return 0
}

// writePktLine appends s as one pkt-line.
func writePktLine(b *bytes.Buffer, s string) { fmt.Fprintf(b, "%04x%s", len(s)+4, s) }

// refuse answers a push the gateway does not forward, counts and logs it. A body that exceeded
// the size limit is answered 413 whatever the parse made of it.
//
// The rest of the body (bounded by the size limit) is read and dropped first: git is still
// sending its packfile, and an answer before the end of the request can reach it as a broken
// pipe instead of the 403 and its reason.
func (h *handler) refuse(w http.ResponseWriter, raw *limitedBody, code int, msg string, cmds []command) {
	if raw.st.tooLarge.Load() {
		code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("push refused: the request exceeds %d bytes (--max-push-bytes)", h.maxBytes)
	} else {
		_, _ = io.Copy(io.Discard, raw)
	}
	h.pushes.WithLabelValues(OutcomeRefused).Inc()
	refs := make([]string, len(cmds))
	for i, c := range cmds {
		refs[i] = c.Ref
	}
	h.log.Warn("git push refused", "status", code, "reason", msg, "refs", refs, "updates", commandStrings(cmds))
	textError(w, code, msg+"\n")
}

func commandStrings(cmds []command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.String()
	}
	return out
}
