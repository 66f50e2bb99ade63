package gitgateway

import (
	"fmt"
	"strings"
)

// refusal is one reason a push is refused: about one ref, or (ref "") the whole push.
type refusal struct{ ref, reason string }

func joinReasons(rs []refusal) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = "push refused: " + r.reason
	}
	return strings.Join(lines, "\n")
}

// allowedCapabilities are the receive-pack capabilities a push may ask for (gitprotocol-capabilities):
// the ones git itself sends, none of which changes what the upstream does beyond the ref updates
// the gateway checked. Anything else is refused by name, push-options above all: a host can read
// options as instructions (open or merge a merge request, set CI variables, skip CI).
var allowedCapabilities = map[string]bool{
	"report-status": true, "report-status-v2": true, "side-band-64k": true, "side-band": true,
	"quiet": true, "atomic": true, "ofs-delta": true, "delete-refs": true, "no-thin": true,
	"agent": true, "object-format": true, "session-id": true,
}

// check returns why push is refused by target; none means it may be forwarded.
func (h *handler) check(push *pushRequest, target *pushTarget) []refusal {
	if push.PushCert {
		return []refusal{{"", "signed pushes (push-cert) are not supported by the git gateway"}}
	}
	if target.noPush != "" {
		return []refusal{{"", target.noPush}}
	}
	var out []refusal
	for _, c := range push.Capabilities {
		name, _, _ := strings.Cut(c, "=")
		switch {
		case name == "push-options":
			out = append(out, refusal{"", "push options (git push -o) are not supported by the git gateway"})
		case !allowedCapabilities[name]:
			out = append(out, refusal{"", fmt.Sprintf("capability %q is not supported by the git gateway", truncate([]byte(c)))})
		}
	}
	for _, c := range push.Commands {
		switch {
		case checkRefFormat(c.Ref) != nil:
			out = append(out, refusal{c.Ref, fmt.Sprintf("%q is not a valid ref name: %v", c.Ref, checkRefFormat(c.Ref))})
		case c.Ref != target.branch && !strings.HasPrefix(c.Ref, target.branch+"/"):
			out = append(out, refusal{c.Ref, fmt.Sprintf("%s is outside %s (the Task's branch)", c.Ref, target.branch)})
		case c.isDelete():
			out = append(out, refusal{c.Ref, fmt.Sprintf("%s would be deleted; the git gateway never deletes refs", c.Ref)})
		}
	}
	return out
}
