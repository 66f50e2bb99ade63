package gitgateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

const (
	oidA    = "1111111111111111111111111111111111111111"
	oidB    = "2222222222222222222222222222222222222222"
	zero1   = "0000000000000000000000000000000000000000"
	oidA256 = "1111111111111111111111111111111111111111111111111111111111111111"
	zero256 = "0000000000000000000000000000000000000000000000000000000000000000"
)

// pkt encodes s as one pkt-line.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// cmds is a command list: the lines as pkt-lines, then a flush-pkt.
func cmds(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(pkt(l))
	}
	b.WriteString("0000")
	return b.String()
}

func TestReadCommands(t *testing.T) {
	const caps = "report-status side-band-64k object-format=sha1 agent=git/2.39.5"
	tests := []struct {
		name      string
		in        string
		want      []command
		shallow   int
		caps      []string
		pushCert  bool
		wantErr   string // substring; empty means success
		wantTotal bool   // the whole input is consumed (there is no pack after the flush)
	}{
		{name: "one command with capabilities", in: cmds(oidA + " " + oidB + " refs/heads/tatara/t1\x00" + caps),
			want: []command{{oidA, oidB, "refs/heads/tatara/t1"}}, caps: strings.Fields(caps), wantTotal: true},
		{name: "trailing newlines are chomped", in: cmds(oidA+" "+oidB+" refs/heads/a\x00report-status\n", oidA+" "+oidB+" refs/heads/b\n"),
			want: []command{{oidA, oidB, "refs/heads/a"}, {oidA, oidB, "refs/heads/b"}}, caps: []string{"report-status"}, wantTotal: true},
		{name: "shallow lines first", in: cmds("shallow "+oidA, "shallow "+oidB, zero1+" "+oidB+" refs/heads/x\x00"),
			want: []command{{zero1, oidB, "refs/heads/x"}}, shallow: 2, wantTotal: true},
		{name: "pack after the flush is not read", in: cmds(oidA+" "+oidB+" refs/heads/x") + "PACK\x00\x00\x00\x02",
			want: []command{{oidA, oidB, "refs/heads/x"}}},
		{name: "sha256 ids", in: cmds(oidA256 + " " + zero256 + " refs/heads/x\x00object-format=sha256"),
			want: []command{{oidA256, zero256, "refs/heads/x"}}, caps: []string{"object-format=sha256"}, wantTotal: true},
		{name: "upper-case length", in: "006A" + oidA + " " + oidB + " refs/heads/abcdefghi" + "0000",
			want: []command{{oidA, oidB, "refs/heads/abcdefghi"}}, wantTotal: true},
		{name: "probe: flush only", in: "0000", wantTotal: true},
		{name: "push-cert", in: cmds("push-cert\x00"+caps, "certificate version 0.1\n"), pushCert: true},

		{name: "empty body", in: "", wantErr: "truncated pkt-line length at byte 0"},
		{name: "no flush", in: pkt(oidA + " " + oidB + " refs/heads/x"), wantErr: "truncated pkt-line length"},
		{name: "short length", in: "00", wantErr: "truncated pkt-line length"},
		{name: "bad length", in: "00zz", wantErr: `bad pkt-line length "00zz"`},
		{name: "signed length", in: "-001", wantErr: "bad pkt-line length"},
		{name: "truncated payload", in: "0064" + oidA, wantErr: "truncated pkt-line payload"},
		{name: "delim pkt", in: "0001" + "0000", wantErr: "unexpected special pkt-line \"0001\""},
		{name: "response-end pkt", in: "0002", wantErr: "unexpected special pkt-line"},
		{name: "length 3", in: "0003", wantErr: "unexpected special pkt-line"},
		{name: "empty pkt", in: "0004" + "0000", wantErr: "empty pkt-line"},
		{name: "length over LARGE_PACKET_MAX", in: "fff1" + strings.Repeat("a", 0xfff1-4), wantErr: "pkt-line length 65521 exceeds 65520"},
		{name: "two fields", in: cmds(oidA + " " + oidB), wantErr: "is not <old-oid> <new-oid> <refname>"},
		{name: "empty ref", in: cmds(oidA + " " + oidB + " "), wantErr: "empty ref name"},
		{name: "short oid", in: cmds(oidA[:39] + " " + oidB + " refs/heads/x"), wantErr: "bad object ids"},
		{name: "non-hex oid", in: cmds(strings.Repeat("g", 40) + " " + oidB + " refs/heads/x"), wantErr: "bad object ids"},
		{name: "mixed oid lengths in a command", in: cmds(oidA + " " + zero256 + " refs/heads/x"), wantErr: "bad object ids"},
		{name: "mixed oid lengths across commands", in: cmds(oidA+" "+oidB+" refs/heads/x", oidA256+" "+zero256+" refs/heads/y"), wantErr: "differs from the first command's 40"},
		{name: "capabilities on a later command", in: cmds(oidA+" "+oidB+" refs/heads/x\x00report-status", oidA+" "+oidB+" refs/heads/y\x00push-options"), wantErr: "capabilities on command 2"},
		{name: "shallow after a command", in: cmds(oidA+" "+oidB+" refs/heads/x", "shallow "+oidA), wantErr: "shallow line after a command"},
		{name: "bad shallow", in: cmds("shallow xyz"), wantErr: "not an object id"},
		{name: "shallow with capabilities", in: cmds("shallow " + oidA + "\x00report-status"), wantErr: "shallow line with capabilities"},
		{name: "too many commands", in: cmds(slicesRepeat(oidA+" "+oidB+" refs/heads/x", MaxCommands+1)...), wantErr: fmt.Sprintf("more than %d ref update commands", MaxCommands)},
		{name: "command list too long", in: strings.Repeat(pkt("shallow "+oidA), MaxCommandListBytes/52+1) + "0000", wantErr: fmt.Sprintf("command list exceeds %d bytes", MaxCommandListBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, raw, err := readCommands(strings.NewReader(tt.in))
			if !strings.HasPrefix(tt.in, string(raw)) {
				t.Fatalf("raw bytes %q are not a prefix of the input", truncate(raw))
			}
			if tt.wantErr != "" {
				var pe *protocolError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a protocol error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if fmt.Sprint(req.Commands) != fmt.Sprint(tt.want) {
				t.Errorf("commands = %v, want %v", req.Commands, tt.want)
			}
			if len(req.Shallow) != tt.shallow {
				t.Errorf("shallow = %v, want %d lines", req.Shallow, tt.shallow)
			}
			if fmt.Sprint(req.Capabilities) != fmt.Sprint(tt.caps) {
				t.Errorf("capabilities = %q, want %q", req.Capabilities, tt.caps)
			}
			if req.PushCert != tt.pushCert {
				t.Errorf("PushCert = %t, want %t", req.PushCert, tt.pushCert)
			}
			if tt.wantTotal && len(raw) != len(tt.in) {
				t.Errorf("read %d bytes of %d", len(raw), len(tt.in))
			}
			if !tt.wantTotal && !tt.pushCert && len(raw) == len(tt.in) {
				t.Errorf("read past the flush-pkt")
			}
		})
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A failing body is reported as a read error, not as a protocol error.
func TestReadCommandsReadError(t *testing.T) {
	boom := errors.New("connection reset")
	_, _, err := readCommands(io.MultiReader(strings.NewReader("00"), iotestErrReader{boom}))
	var pe *protocolError
	if !errors.Is(err, boom) || errors.As(err, &pe) {
		t.Fatalf("err = %v, want the read error", err)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestCommandIsDelete(t *testing.T) {
	for _, tt := range []struct {
		c    command
		want bool
	}{
		{command{oidA, zero1, "refs/heads/x"}, true},
		{command{oidA256, zero256, "refs/heads/x"}, true},
		{command{zero1, oidA, "refs/heads/x"}, false},
		{command{oidA, oidB, "refs/heads/x"}, false},
	} {
		if got := tt.c.isDelete(); got != tt.want {
			t.Errorf("%v: isDelete = %t, want %t", tt.c, got, tt.want)
		}
	}
}

// FuzzParseCommands: readCommands never panics, never reads past what it returns, and what it
// accepts stays within its bounds.
func FuzzParseCommands(f *testing.F) {
	f.Add([]byte(cmds(oidA + " " + oidB + " refs/heads/tatara/t1\x00report-status side-band-64k")))
	f.Add([]byte(cmds("shallow "+oidA, zero1+" "+oidB+" refs/heads/tatara/t1/x\x00report-status\n", oidA+" "+zero1+" refs/tags/v1\n") + "PACK"))
	f.Add([]byte(cmds(oidA256 + " " + zero256 + " refs/heads/x\x00object-format=sha256")))
	f.Add([]byte(cmds("push-cert\x00report-status", "certificate version 0.1\n")))
	f.Add([]byte("0000"))
	f.Add([]byte("0001"))
	f.Add([]byte("ffff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, raw, err := readCommands(r)
		if !bytes.HasPrefix(data, raw) {
			t.Fatalf("raw is not a prefix of the input")
		}
		if read := int(r.Size()) - r.Len(); read > MaxCommandListBytes+4 {
			t.Fatalf("read %d bytes, over the %d limit", read, MaxCommandListBytes)
		}
		if err != nil {
			return
		}
		// What is forwarded is raw, then the rest of the body: nothing read may be missing.
		if read := int(r.Size()) - r.Len(); read != len(raw) {
			t.Fatalf("read %d bytes but returned %d", read, len(raw))
		}
		if len(req.Commands) > MaxCommands {
			t.Fatalf("%d commands accepted", len(req.Commands))
		}
		for _, c := range req.Commands {
			if !isOID([]byte(c.Old)) || !isOID([]byte(c.New)) || c.Ref == "" || strings.ContainsRune(c.Ref, 0) {
				t.Fatalf("accepted a malformed command %q", c)
			}
		}
	})
}
