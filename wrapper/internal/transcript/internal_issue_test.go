package transcript

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/profiles"
)

// TestInternalIssueEnumsAreTheCLIs: the wrapper clamps none of the values the cli accepts for
// report_internal_issue, its defaults are values the cli accepts, and the counter's pre-created
// series are exactly the cli's categories times its severities.
func TestInternalIssueEnumsAreTheCLIs(t *testing.T) {
	categories, severities := profiles.IssueCategories(), profiles.IssueSeverities()
	if len(categories) == 0 || len(severities) == 0 {
		t.Fatalf("the cli exports no enums: categories %v, severities %v", categories, severities)
	}
	for _, c := range categories {
		if got := clampCategory(c); got != c {
			t.Errorf("cli category %q clamps to %q", c, got)
		}
	}
	for _, s := range severities {
		if got := clampSeverity(s); got != s {
			t.Errorf("cli severity %q clamps to %q", s, got)
		}
	}
	if !slices.Contains(categories, defaultCategory) {
		t.Errorf("default category %q is not one of the cli's %v", defaultCategory, categories)
	}
	if !slices.Contains(severities, defaultSeverity) {
		t.Errorf("default severity %q is not one of the cli's %v", defaultSeverity, severities)
	}

	var want [][2]string
	for _, c := range categories {
		for _, s := range severities {
			want = append(want, [2]string{c, s})
		}
	}
	slices.SortFunc(want, func(a, b [2]string) int {
		return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1])
	})
	if got := InternalIssueLabels(); !reflect.DeepEqual(got, want) {
		t.Errorf("InternalIssueLabels() = %v, want the cli's cross product %v", got, want)
	}

	// End to end: a report carrying any cli pair is counted under that pair, unclamped.
	for _, pair := range want {
		fake := &fakeIssueCounter{}
		tl, _ := newTestTailer(WithInternalIssueCounter(fake))
		input := fmt.Sprintf(`{"category":%q,"severity":%q,"description":"d"}`, pair[0], pair[1])
		feed(tl, assistantLine("msg_1", toolUseBlock("toolu_1", internalIssueToolName, input)))
		if w := [][]string{{pair[0], pair[1]}}; !reflect.DeepEqual(fake.calls, w) {
			t.Errorf("report %s/%s counted as %v", pair[0], pair[1], fake.calls)
		}
	}
}
