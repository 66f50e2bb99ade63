package buildinfo

import "testing"

func TestRevision(t *testing.T) {
	if got := Revision("abc123"); got != "abc123" {
		t.Errorf("Revision(stamped) = %q, want the stamped value", got)
	}
	// A test binary records no VCS revision, so the fallback is what is left.
	if got := Revision(""); got != "unknown" {
		t.Errorf(`Revision("") = %q in a test binary, want "unknown"`, got)
	}
}
