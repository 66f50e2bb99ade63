// Package redact removes secrets (bearer credentials, tokens, API keys, the Task token) from text
// before the cli or the wrapper logs it. The Task token has a shape of its own, tatara_ and 64
// lower-case hex characters (cli/pkg/tasktoken, by which the operator mints it), so it is masked
// by that shape even where its value is unknown: the wrapper never gets it. Whatever an agent sends (a report's
// description, a transcript line) carries what the model and its tools saw, so it is treated as
// hostile to the log pipeline. It lives in the cli module, beside pkg/profiles, so both binaries mask
// the same shapes.
package redact

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"unicode/utf8"

	"tatara.dev/cli/pkg/tasktoken"
)

// Mask replaces every secret found.
const Mask = "[REDACTED]"

// minLiteral is the shortest literal secret the Redactor accepts: masking a two-letter value
// would shred ordinary text and hides nothing worth hiding.
const minLiteral = 8

// patterns match secrets by shape. Each keeps a non-secret prefix in group 1 (when it has one) so a
// reader still sees what kind of value was removed; none crosses a JSON string quote, so redacting
// JSON text leaves it valid JSON.
var patterns = []*regexp.Regexp{
	// Authorization headers and their echoes: "Bearer abc", "Basic abc".
	regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{4,}`),
	// "token": "...", "api_key": "...", "password": "..." and friends, inside JSON text, with the
	// value possibly escaped.
	regexp.MustCompile(`(?i)("[a-z0-9_-]*(?:token|api[_-]?key|apikey|secret|password|passwd|authorization|credential|private[_-]?key)[a-z0-9_-]*\\?"\s*:\s*\\?")(?:[^"\\]|\\[^"])+`),
	// Well-known key formats: Anthropic/OpenAI (sk-...), GitHub (ghp_, gho_, ghs_, ghu_, ghr_,
	// github_pat_), GitLab (glpat-), Slack (xox?-), AWS access key ids, Google API keys.
	regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})`),
	// The Task token (its shape: cli/pkg/tasktoken), wherever it is glued: the prefix stays to
	// say what was removed.
	regexp.MustCompile(tasktoken.Pattern),
	// PEM private keys.
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
}

// assignment matches KEY=value and key: value in env dumps, shell commands and config files; a value
// made only of digits is kept because it is a count ("max_tokens: 4096"), not a credential.
var assignment = regexp.MustCompile(`(?i)(\b[a-z0-9_]*(?:token|api[_-]?key|apikey|secret|password|passwd|credential)[a-z0-9_]*\s*[=:]\s*)([^\s"'\\,;&|]{4,})`)

// triggers are cheap lower-case substrings; a string containing none of them cannot match any
// pattern, which keeps the per-log-line cost to one pass over short strings.
var triggers = []string{
	"bearer", "basic", "token", "key", "secret", "passw", "authorization", "credential",
	"sk-", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "glpat-", "xox", "akia", "aiza", "-----begin", "tatara_",
}

// Redactor masks secrets. The zero value masks shapes only; New adds literal values.
type Redactor struct {
	literals []string
}

// New returns a Redactor that also masks each literal value (e.g. the Task token) of at least
// 8 bytes wherever it appears; shorter or empty values are ignored.
func New(literals ...string) *Redactor {
	r := &Redactor{}
	for _, l := range literals {
		if len(l) >= minLiteral {
			r.literals = append(r.literals, l)
		}
	}
	return r
}

// String returns s with every secret replaced by Mask.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	if r != nil {
		for _, l := range r.literals {
			if strings.Contains(s, l) {
				s = strings.ReplaceAll(s, l, Mask)
			}
		}
	}
	if !mayContainSecret(s) {
		return s
	}
	for _, p := range patterns {
		s = p.ReplaceAllString(s, "${1}"+Mask)
	}
	return assignment.ReplaceAllStringFunc(s, func(m string) string {
		sub := assignment.FindStringSubmatch(m)
		if strings.Trim(sub[2], "0123456789") == "" || sub[2] == Mask {
			return m
		}
		return sub[1] + Mask
	})
}

// Bytes is String for byte slices; it returns b itself when nothing was masked.
func (r *Redactor) Bytes(b []byte) []byte {
	s := string(b)
	out := r.String(s)
	if out == s {
		return b
	}
	return []byte(out)
}

// MaxAttrBytes bounds every string and error attribute of a log line, the message included:
// reports, argument errors, refused pushes and transcript lines are the agent's text, and one
// unbounded field would make one log line as large as the agent likes.
const MaxAttrBytes = 512

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that redacts every string and error attribute,
// the message included (a safety net under the explicit redaction of transcript-derived fields),
// then cuts it to MaxAttrBytes, saying how much was cut.
func (r *Redactor) ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		out := s
		if len(s) >= minLiteral {
			out = r.String(s)
		}
		if out = Truncate(out); out != s {
			a.Value = slog.StringValue(out)
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && err != nil {
			a.Value = slog.StringValue(Truncate(r.String(err.Error())))
		}
	default:
	}
	return a
}

// Truncate cuts s to at most MaxAttrBytes on a rune boundary, ending it with how many bytes were
// cut; a shorter s is returned as it is.
func Truncate(s string) string { return TruncateTo(s, MaxAttrBytes) }

// TruncateTo is Truncate to at most limit bytes (limit above 40, the room of the suffix).
func TruncateTo(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// Room for the suffix, "…[<up to 20 digits> bytes cut]".
	keep := limit - 40
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + fmt.Sprintf("…[%d bytes cut]", len(s)-keep)
}

func mayContainSecret(s string) bool {
	lower := toLowerASCII(s)
	for _, t := range triggers {
		if strings.Contains(lower, t) {
			return true
		}
	}
	return false
}

// toLowerASCII avoids strings.ToLower's Unicode tables: the triggers are ASCII.
func toLowerASCII(s string) string {
	hasUpper := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			hasUpper = true
			break
		}
	}
	if !hasUpper {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
