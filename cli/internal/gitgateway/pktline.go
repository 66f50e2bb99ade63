package gitgateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds of the command list of one push, read before anything is forwarded.
const (
	// MaxCommands is the most ref updates one push may carry.
	MaxCommands = 1000
	// MaxCommandListBytes is the most bytes of pkt-lines (shallow lines, commands and the closing
	// flush-pkt) read before the packfile.
	MaxCommandListBytes = 1 << 20
	// maxPktLen is git's LARGE_PACKET_MAX: the longest pkt-line, its 4-byte header included.
	maxPktLen = 65520
)

// command is one ref update of a push: <old-oid> SP <new-oid> SP <refname>.
type command struct {
	Old, New, Ref string
}

// isDelete reports whether the command deletes its ref (the new object id is all zeros).
func (c command) isDelete() bool { return strings.Trim(c.New, "0") == "" }

// String is how logs and refusals show the command.
func (c command) String() string { return c.Old + " " + c.New + " " + c.Ref }

// pushRequest is the head of a git-receive-pack request body.
type pushRequest struct {
	Shallow      []string
	Commands     []command
	Capabilities []string
	// PushCert is set when the client sent a signed push (a "push-cert" line).
	PushCert bool
}

// hasCapability reports whether the client asked for capability name (with or without "=value").
func (p *pushRequest) hasCapability(name string) bool {
	for _, c := range p.Capabilities {
		if c == name || strings.HasPrefix(c, name+"=") {
			return true
		}
	}
	return false
}

// refs returns the ref names of the commands, in order.
func (p *pushRequest) refs() []string {
	out := make([]string, len(p.Commands))
	for i, c := range p.Commands {
		out[i] = c.Ref
	}
	return out
}

// protocolError is a malformed or oversized command list: the client's fault, answered with 400.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "invalid push request: " + e.msg }

func protoErr(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// readCommands reads the command list at the start of a git-receive-pack request body from r:
// optional "shallow <oid>" pkt-lines, then the ref update commands (the first one carrying
// "\0<capabilities>"), then a flush-pkt. It returns the parsed request and every byte it read, so
// the caller can forward them followed by the rest of r (the packfile). It never reads past the
// flush-pkt.
//
// It is stricter than git's receive-pack, never looser, so that every list it accepts means the
// same to the upstream as to the gateway: a shallow line after a command, capabilities on a
// later command, delim or empty pkt-lines and object ids of mixed lengths are errors. A
// "push-cert" line ends the parse with PushCert set (the caller refuses it). Errors from r other
// than end of input are returned as they are (wrapped); malformed input gives a *protocolError.
func readCommands(r io.Reader) (*pushRequest, []byte, error) {
	req := &pushRequest{}
	var raw []byte
	oidLen := 0
	for {
		if len(raw)+4 > MaxCommandListBytes {
			return nil, raw, protoErr("command list exceeds %d bytes", MaxCommandListBytes)
		}
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, raw, readErr(err, "pkt-line length", len(raw))
		}
		raw = append(raw, hdr[:]...)
		n, ok := parsePktLen(hdr)
		switch {
		case !ok:
			return nil, raw, protoErr("bad pkt-line length %q at byte %d", hdr[:], len(raw)-4)
		case n == 0: // flush-pkt: the end of the command list
			return req, raw, nil
		case n < 4:
			return nil, raw, protoErr("unexpected special pkt-line %q in the command list", hdr[:])
		case n == 4:
			return nil, raw, protoErr("empty pkt-line in the command list")
		case n > maxPktLen:
			return nil, raw, protoErr("pkt-line length %d exceeds %d", n, maxPktLen)
		case len(raw)+n-4 > MaxCommandListBytes:
			return nil, raw, protoErr("command list exceeds %d bytes", MaxCommandListBytes)
		}
		payload := make([]byte, n-4)
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil, raw, readErr(err, "pkt-line payload", len(raw))
		}
		raw = append(raw, payload...)

		// git chomps one trailing LF, then the command ends at the first NUL.
		line := bytes.TrimSuffix(payload, []byte("\n"))
		cmd, caps, hasCaps := bytes.Cut(line, []byte{0})

		if bytes.HasPrefix(cmd, []byte("push-cert")) {
			req.PushCert = true
			return req, raw, nil
		}
		if hex, ok := bytes.CutPrefix(cmd, []byte("shallow ")); ok {
			if len(req.Commands) > 0 {
				return nil, raw, protoErr("shallow line after a command")
			}
			if hasCaps {
				return nil, raw, protoErr("shallow line with capabilities")
			}
			if !isOID(hex) {
				return nil, raw, protoErr("shallow line %q: not an object id", truncate(hex))
			}
			req.Shallow = append(req.Shallow, string(hex))
			continue
		}
		if hasCaps {
			if len(req.Commands) > 0 {
				return nil, raw, protoErr("capabilities on command %d; only the first command carries them", len(req.Commands)+1)
			}
			// git reads the capability list as a C string: it ends at the next NUL, and what
			// follows is ignored. Reading past it would let "push-options\0x" hide the
			// capability that git does honour.
			caps, _, _ = bytes.Cut(caps, []byte{0})
			req.Capabilities = strings.Fields(string(caps))
		}
		if len(req.Commands) == MaxCommands {
			return nil, raw, protoErr("more than %d ref update commands", MaxCommands)
		}
		c, err := parseCommand(cmd, &oidLen)
		if err != nil {
			return nil, raw, err
		}
		req.Commands = append(req.Commands, c)
	}
}

// readErr names where the body ended or failed.
func readErr(err error, what string, at int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return protoErr("truncated %s at byte %d (no flush-pkt ends the command list)", what, at)
	}
	return fmt.Errorf("failed to read the push request at byte %d: %w", at, err)
}

// parseCommand parses "<old-oid> SP <new-oid> SP <refname>". Every object id of one push has the
// same length, 40 (sha1) or 64 (sha256); *oidLen holds the length seen first.
func parseCommand(line []byte, oidLen *int) (command, error) {
	oldID, rest, ok1 := bytes.Cut(line, []byte(" "))
	newID, ref, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return command{}, protoErr("command %q is not <old-oid> <new-oid> <refname>", truncate(line))
	}
	if !isOID(oldID) || !isOID(newID) || len(oldID) != len(newID) {
		return command{}, protoErr("command %q: bad object ids", truncate(line))
	}
	if *oidLen == 0 {
		*oidLen = len(oldID)
	} else if len(oldID) != *oidLen {
		return command{}, protoErr("command %q: object id length %d differs from the first command's %d", truncate(line), len(oldID), *oidLen)
	}
	if len(ref) == 0 {
		return command{}, protoErr("command %q has an empty ref name", truncate(line))
	}
	return command{Old: string(oldID), New: string(newID), Ref: string(ref)}, nil
}

// isOID reports whether b is a hex object id of sha1 (40) or sha256 (64) length.
func isOID(b []byte) bool {
	if len(b) != 40 && len(b) != 64 {
		return false
	}
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parsePktLen decodes a pkt-line's 4 hex digit length.
func parsePktLen(h [4]byte) (int, bool) {
	n := 0
	for _, c := range h {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int(v)
	}
	return n, true
}

// truncate shortens client-supplied text for an error message.
func truncate(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
