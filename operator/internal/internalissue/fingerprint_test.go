package internalissue

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"tatara.dev/cli/pkg/internalissue"
	"tatara.dev/cli/pkg/tasktoken"
)

type report struct{ project, category, tool, description string }

func (r report) fingerprint() string {
	return Fingerprint(r.project, r.category, r.tool, r.description)
}

// TestFingerprintGroups: reports that say one problem in words that differ only in what varies
// between two occurrences group together.
func TestFingerprintGroups(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"numbers", "memory_search timed out after 30s on pod tatara-agent-impl-7",
			"memory_search timed out after 12s on pod tatara-agent-impl-93"},
		{"hex ids", "commit 4f9c2e1ab is not on the branch", "commit 77aa0b3c91d is not on the branch"},
		{"uuids", "note 123e4567-e89b-12d3-a456-426614174000 vanished", "note 9b2f0c1e-0000-4a5b-8c9d-0123456789ab vanished"},
		{"quoted values", `no repo named "shop-api" in the project`, "no repo named 'billing' in the project"},
		{"case and white space", "Memory search  is DOWN\n", "  memory search is down"},
		{"a different tail past 200 characters", strings.Repeat("memory search is down ", 10) + "first tail",
			strings.Repeat("memory search is down ", 10) + "second, other tail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := report{"shop", "tool_error", "memory_search", tt.a}.fingerprint()
			b := report{"shop", "tool_error", "memory_search", tt.b}.fingerprint()
			if a != b {
				t.Errorf("%q and %q group apart: normalised %q and %q", tt.a, tt.b, Normalize(tt.a), Normalize(tt.b))
			}
		})
	}
}

// TestFingerprintSeparates: what makes a report another problem gives another group.
func TestFingerprintSeparates(t *testing.T) {
	base := report{"shop", "tool_error", "memory_search", "memory_search timed out"}
	tests := []struct {
		name string
		r    report
	}{
		{"another project", report{"bank", base.category, base.tool, base.description}},
		{"another category", report{base.project, "auth", base.tool, base.description}},
		{"another tool", report{base.project, base.category, "graph_search", base.description}},
		{"no tool", report{base.project, base.category, "", base.description}},
		{"other words", report{base.project, base.category, base.tool, "memory_search returned stale notes"}},
		// The separator keeps fields apart: moving text from one field to the next is another group.
		{"text moved across fields", report{base.project, base.category + "memory_search", "", base.description}},
	}
	seen := map[string]string{base.fingerprint(): "base"}
	for _, tt := range tests {
		fp := tt.r.fingerprint()
		if other, dup := seen[fp]; dup {
			t.Errorf("%s: same fingerprint as %s", tt.name, other)
		}
		seen[fp] = tt.name
	}
}

// TestNormalizeMasksSecrets: a secret never reaches the grouping input (nor, by the hash, a name),
// and two reports that differ only in the secret they leaked group together.
func TestNormalizeMasksSecrets(t *testing.T) {
	token := tasktoken.Prefix + strings.Repeat("ab", tasktoken.Size)
	a := Normalize("auth failed with Authorization: Bearer abcdefghijklmnop and " + token)
	b := Normalize("auth failed with Authorization: Bearer zyxwvutsrqponmlk and " + tasktoken.Prefix + strings.Repeat("cd", tasktoken.Size))
	if a != b {
		t.Errorf("reports differing only in their secrets normalise apart: %q, %q", a, b)
	}
	if strings.Contains(a, "abcdefghijklmnop") || strings.Contains(a, token[len(token)-20:]) {
		t.Errorf("Normalize kept a secret: %q", a)
	}
}

// TestStoredDescription: masked as the logs are, and bounded.
func TestStoredDescription(t *testing.T) {
	secret := "sk-ant-" + strings.Repeat("x", 40)
	got := StoredDescription("the model key " + secret + " leaked into the workspace")
	if strings.Contains(got, secret) || !strings.Contains(got, "[REDACTED]") {
		t.Errorf("StoredDescription = %q: want the key masked", got)
	}
	long := StoredDescription(strings.Repeat("é", internalissue.MaxDescriptionBytes))
	if len(long) > internalissue.StoredDescriptionBytes || !strings.Contains(long, "bytes cut") {
		t.Errorf("StoredDescription of %d bytes = %d bytes ending %q: want at most %d, saying what was cut",
			internalissue.MaxDescriptionBytes*2, len(long), long[len(long)-30:], internalissue.StoredDescriptionBytes)
	}
}

// TestNamesAreValidAndCarryNoReportText: record names are DNS subdomain names made of the hash.
func TestNamesAreValidAndCarryNoReportText(t *testing.T) {
	hexName := regexp.MustCompile(`^ii-(overflow-)?[0-9a-f]{20}$`)
	for _, name := range []string{
		RecordName(Fingerprint("Shop_Project.v2", "other", "<script>", strings.Repeat("A", 5000))),
		OverflowName("Shop_Project.v2"),
	} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || !hexName.MatchString(name) {
			t.Errorf("name %q: %v; want ii-[overflow-]<20 hex>", name, errs)
		}
	}
	if OverflowName("a") == OverflowName("b") {
		t.Error("two Projects share an overflow record")
	}
}

func TestHigherSeverity(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"", "warn", "warn"}, {"warn", "error", "error"}, {"error", "warn", "error"}, {"warn", "warn", "warn"}, {"", "error", "error"},
	}
	for _, tt := range tests {
		if got := HigherSeverity(tt.a, tt.b); got != tt.want {
			t.Errorf("HigherSeverity(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
