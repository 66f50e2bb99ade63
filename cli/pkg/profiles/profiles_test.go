package profiles

import "testing"

func TestExportedProfiles(t *testing.T) {
	if got := len(Names()); got != 7 {
		t.Errorf("Names() = %d profiles, want 7", got)
	}
	if got := len(OperatorTools()); got != 20 {
		t.Errorf("OperatorTools() = %d, want 20", got)
	}
	if got := len(All()); got != 63 {
		t.Errorf("All() = %d, want 63", got)
	}
	if tools, ok := Tools("review"); !ok || len(tools) != 39 || !tools["review_verdict"] {
		t.Errorf("Tools(review) = %d tools, ok=%t", len(tools), ok)
	}
	if _, ok := Tools("triageIssue"); ok {
		t.Error("a Task kind is not a profile name: Tools(triageIssue) must fail open")
	}
}
