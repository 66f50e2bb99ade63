package profiles

import (
	"slices"
	"testing"

	"tatara.dev/cli/internal/catalog"
)

// The exports are views of the catalog; its own tests pin the numbers.
func TestExportedProfiles(t *testing.T) {
	if got, want := Names(), catalog.ProfileNames(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if got, want := len(OperatorTools()), len(catalog.OperatorTools()); got != want {
		t.Errorf("OperatorTools() = %d, want %d", got, want)
	}
	if got, want := len(All()), len(catalog.All()); got != want || !slices.IsSorted(All()) {
		t.Errorf("All() = %d tools (sorted %t), want %d sorted", got, slices.IsSorted(All()), want)
	}
	if tools, ok := Tools("review"); !ok || !tools["review_verdict"] {
		t.Errorf("Tools(review) = %d tools, ok=%t; want review_verdict in it", len(tools), ok)
	}
	if _, ok := Tools("triageIssue"); ok {
		t.Error("a Task kind is not a profile name: Tools(triageIssue) must fail open")
	}
	for _, kind := range Kinds() {
		if p := ForKind(kind); p == "" || !slices.Contains(Names(), p) {
			t.Errorf("ForKind(%q) = %q, not a known profile", kind, p)
		}
	}
	if ForKind("healthCheck") != "" {
		t.Error(`ForKind("healthCheck") must be "" (healthCheck Tasks are kind brainstorm)`)
	}
}

func TestIssueEnumsAreCopies(t *testing.T) {
	cats := IssueCategories()
	if !slices.Equal(cats, catalog.IssueCategories) || !slices.Equal(IssueSeverities(), catalog.IssueSeverities) {
		t.Fatalf("IssueCategories/IssueSeverities differ from the catalog's")
	}
	cats[0] = "mutated"
	if IssueCategories()[0] == "mutated" {
		t.Error("IssueCategories returns the catalog's slice; a caller could change the enum")
	}
}
