// Package internalissue groups report_internal_issue reports: the fingerprint that says which
// reports are one problem, the record's name derived from it, and the masked description a record
// keeps. It knows nothing of HTTP or of the API server (taskops records, rest serves).
package internalissue

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"tatara.dev/cli/pkg/internalissue"
	"tatara.dev/cli/pkg/redact"
)

// GroupingVersion is the version of the grouping rule (Fingerprint and Normalize). Change it with
// the rule: records of the old rule keep their names and counts, and reports of the new one make
// records of their own, so an upgrade never regroups what was already counted.
const GroupingVersion = 1

// normalizedRunes bounds the part of a description that decides its group: two reports that say
// the same first 200 characters (after Normalize) are one problem, whatever detail follows.
const normalizedRunes = 200

var (
	uuids      = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	hexRuns    = regexp.MustCompile(`\b[0-9a-f]{7,}\b`)
	numbers    = regexp.MustCompile(`\d+`)
	quoted     = regexp.MustCompile("\"[^\"\\n]*\"|'[^'\\n]*'|`[^`\\n]*`")
	whitespace = regexp.MustCompile(`\s+`)
)

// Normalize is the description as it groups: secrets masked, lower case, what differs between two
// reports of one problem replaced by a placeholder (quoted values, UUIDs, commit ids and other hex
// ids, numbers: a path, a line number, a pod's name suffix, a duration), white space collapsed, and
// cut to its first 200 characters.
func Normalize(description string) string {
	s := strings.ToLower(redact.New().String(description))
	s = quoted.ReplaceAllString(s, "<q>")
	s = uuids.ReplaceAllString(s, "<id>")
	s = hexRuns.ReplaceAllString(s, "<hex>")
	s = numbers.ReplaceAllString(s, "<n>")
	s = strings.TrimSpace(whitespace.ReplaceAllString(s, " "))
	if utf8.RuneCountInString(s) > normalizedRunes {
		s = string([]rune(s)[:normalizedRunes])
	}
	return s
}

// Fingerprint names the group of a report of a Project's Task: the SHA-256, in hex, of the
// grouping version, the Project, the category, the offending tool and the normalised description.
// Severity, resource id and the reporting Task are left out: they vary within one problem.
func Fingerprint(project, category, offendingTool, description string) string {
	h := sha256.New()
	for _, part := range []string{"v" + strconv.Itoa(GroupingVersion), project, category, offendingTool, Normalize(description)} {
		h.Write([]byte(part))
		h.Write([]byte{0}) // a separator no part holds, so ("ab", "c") and ("a", "bc") differ
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RecordName is the InternalIssue that holds a fingerprint's group: derived from the hash alone,
// so nothing a report says becomes a name.
func RecordName(fingerprint string) string { return "ii-" + fingerprint[:20] }

// OverflowName is the Project's record that counts the reports of new groups past the cap.
func OverflowName(project string) string { return "ii-overflow-" + OverflowFingerprint(project)[:20] }

// StoredDescription is the description a record keeps: secrets masked, cut to
// internalissue.StoredDescriptionBytes on a rune boundary.
func StoredDescription(description string) string {
	return redact.TruncateTo(redact.New().String(description), internalissue.StoredDescriptionBytes)
}

// HigherSeverity returns the more severe of two severities (the tool's enum orders them); an
// empty or unknown one counts as the least.
func HigherSeverity(a, b string) string {
	order := internalissue.Severities()
	if slices.Index(order, b) > slices.Index(order, a) {
		return b
	}
	return a
}

// OverflowFingerprint is the overflow record's fingerprint: of the Project alone.
func OverflowFingerprint(project string) string {
	sum := sha256.Sum256([]byte("overflow\x00" + project))
	return hex.EncodeToString(sum[:])
}
