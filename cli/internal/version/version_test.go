package version

import "testing"

func TestRevisionPrefersTheStampedValue(t *testing.T) {
	old := revision
	t.Cleanup(func() { revision = old })
	revision = ""
	if got := Revision(); got == "" {
		t.Fatal("an unstamped build must still name a revision (or unknown)")
	}
	revision = "abc123"
	if got := Revision(); got != "abc123" {
		t.Fatalf("Revision() = %q, want the stamped abc123", got)
	}
}
