package token

import (
	"encoding/hex"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/redact"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != Len || Len != 71 {
			t.Fatalf("token %q has %d characters, want %d (tatara_ and 64 hex)", tok, len(tok), Len)
		}
		rest, ok := strings.CutPrefix(tok, "tatara_")
		if !ok {
			t.Fatalf("token %q does not start with tatara_", tok)
		}
		if b, err := hex.DecodeString(rest); err != nil || len(b) != Size || rest != strings.ToLower(rest) {
			t.Fatalf("token %q is not tatara_ and %d lower-case hex-encoded bytes: %v", tok, Size, err)
		}
		if !Valid(tok) {
			t.Fatalf("Valid(%q) = false for a minted token", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q minted twice", tok)
		}
		seen[tok] = true
	}
}

func TestHash(t *testing.T) {
	tests := []struct {
		name  string
		token string
		want  string
	}{
		{"empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc (FIPS 180-2 vector)", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"64 zeros, as a token", "0000000000000000000000000000000000000000000000000000000000000000",
			"60e05bd1b195af2f94112fa7197a5c88289058840ce7c6df9693756bc6250f55"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Hash(tt.token); got != tt.want {
				t.Fatalf("Hash(%q) = %s, want %s", tt.token, got, tt.want)
			}
		})
	}
	tok, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if h := Hash(tok); h == tok || h != Hash(strings.Clone(tok)) {
		t.Fatal("Hash must be deterministic and differ from the token")
	}
}

func TestValid(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name string
		s    string
		want bool
	}{
		{"minted shape", "tatara_" + hex64, true},
		{"no prefix", hex64, false},
		{"other prefix", "tatara-" + hex64, false},
		{"upper-case hex", "tatara_" + strings.ToUpper(hex64), false},
		{"too short", "tatara_" + hex64[1:], false},
		{"too long", "tatara_" + hex64 + "0", false},
		{"not hex", "tatara_" + strings.Repeat("g", 64), false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid(tt.s); got != tt.want {
				t.Fatalf("Valid(%q) = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	tok, err := New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !Matches(tok, Hash(tok)) {
		t.Fatal("a token must match its own hash")
	}
	if Matches(other, Hash(tok)) {
		t.Fatal("a token must not match another token's hash")
	}
	if Matches(tok, "") || Matches("", "") {
		t.Fatal("an empty hash (none recorded yet) must match nothing")
	}
	if Matches(tok, Hash(tok)[:63]) {
		t.Fatal("a truncated hash must not match")
	}
}

func TestFromAuthorization(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   string
		wantOK bool
	}{
		{"bearer token", "Bearer abc123", "abc123", true},
		{"minted shape", "Bearer tatara_" + strings.Repeat("ab", 32), "tatara_" + strings.Repeat("ab", 32), true},
		{"surrounding space is dropped", "Bearer   abc123 \t", "abc123", true},
		{"no header", "", "", false},
		{"scheme only", "Bearer ", "", false},
		{"white space only", "Bearer    ", "", false},
		{"no space after the scheme", "Bearerabc123", "", false},
		{"scheme is case-sensitive", "bearer abc123", "", false},
		{"other scheme", "Basic dXNlcjpwYXNz", "", false},
		{"bare token", "abc123", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromAuthorization(tt.header)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("FromAuthorization(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestMintedTokensAreRedacted: what New mints is masked by the log redaction of the cli and the
// wrapper, wherever it is glued into a line, without its value being known there.
func TestMintedTokensAreRedacted(t *testing.T) {
	for range 20 {
		tok, err := New()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{tok, "Authorization: Bearer " + tok, "x" + tok + "y", `{"t":"` + tok + `"}`} {
			// The zero Redactor knows no value: only the shape can mask the token.
			if got := (&redact.Redactor{}).String(line); strings.Contains(got, tok[len(Prefix):]) {
				t.Errorf("Redactor.String(%q) = %q: the token's secret part is still there", line, got)
			}
		}
	}
}
