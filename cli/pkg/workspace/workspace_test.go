package workspace

import (
	"strings"
	"testing"
)

func TestFailureRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		in      Failure
		wantMsg string
	}{
		{"short", Failure{Reason: AuthFailed, Message: "remote: Authentication failed"}, "remote: Authentication failed"},
		{"empty message", Failure{Reason: Timeout}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseFailure(string(tt.in.Encode()))
			if got.Reason != tt.in.Reason || got.Message != tt.wantMsg {
				t.Errorf("round trip of %+v = %+v", tt.in, got)
			}
		})
	}
}

func TestEncodeCutsLongMessages(t *testing.T) {
	// Multi-byte runes and characters JSON escapes (<, ") make the encoded form longer than the text.
	for _, unit := range []string{"a", "é", "<", `"`, "\x01"} {
		f := Failure{Reason: CloneFailed, Message: strings.Repeat(unit, 3*MaxMessageBytes)}
		b := f.Encode()
		if len(b) > MaxMessageBytes {
			t.Fatalf("unit %q: encoded %d bytes, limit %d", unit, len(b), MaxMessageBytes)
		}
		got := ParseFailure(string(b))
		if got.Reason != CloneFailed || !strings.HasSuffix(got.Message, "...") || len(got.Message) < MaxMessageBytes/8 {
			t.Errorf("unit %q: parsed %q... (%d bytes), want a cut message ending in ...", unit, got.Message[:min(20, len(got.Message))], len(got.Message))
		}
	}
}

func TestParseFailureKeepsUnknownText(t *testing.T) {
	for _, msg := range []string{"", "not json", `{"reason":"Bogus","message":"x"}`} {
		got := ParseFailure(msg)
		if got.Reason != CloneFailed || !strings.Contains(got.Message, "unrecognised termination message") {
			t.Errorf("ParseFailure(%q) = %+v, want CloneFailed naming the raw text", msg, got)
		}
	}
}
