// Package releasecheck prints the result of a chart's post-deploy check (`helm test`): one line
// per check, `PASS  <what was checked>` or `FAIL  <what was checked>: <cause>`, then one summary
// line, `release-check <chart>: N checks, N passed` (with `, M FAILED` when any failed). The cli,
// wrapper and operator images share it, so an SRE reads the same format in every chart's test
// log, and the e2e suite can count the summaries of `helmfile test --logs`.
package releasecheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Report collects the checks of one chart's release check and writes each as it is recorded.
type Report struct {
	w              io.Writer
	chart          string
	checks, passed int
}

// New starts the report of chart, written to w.
func New(w io.Writer, chart string) *Report { return &Report{w: w, chart: chart} }

// Check records one check: PASS when err is nil, else FAIL with err as the cause.
func (r *Report) Check(what string, err error) {
	r.checks++
	if err == nil {
		r.passed++
		_, _ = fmt.Fprintf(r.w, "PASS  %s\n", oneLine(what))
		return
	}
	_, _ = fmt.Fprintf(r.w, "FAIL  %s: %s\n", oneLine(what), oneLine(err.Error()))
}

// Failed reports whether any check failed so far.
func (r *Report) Failed() bool { return r.passed < r.checks }

// Done writes the summary line and returns the process exit code: 0 when every check passed, 1
// when one failed or when nothing was checked (a check that checked nothing proves nothing).
func (r *Report) Done() int {
	line := fmt.Sprintf("release-check %s: %d checks, %d passed", r.chart, r.checks, r.passed)
	if failed := r.checks - r.passed; failed > 0 {
		line += fmt.Sprintf(", %d FAILED", failed)
	}
	if r.checks == 0 {
		line += " (nothing was checked)"
	}
	_, _ = fmt.Fprintln(r.w, line)
	if r.checks == 0 || r.Failed() {
		return 1
	}
	return 0
}

// oneLine keeps a check's text on its own line of the log: an error that spans lines (an HTTP
// body, a wrapped multi-line message) is joined with " | ".
func oneLine(s string) string {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, " | ")
}

// RuntimeImage checks that the runtime ConfigMap mounted at dir (key image) names want.
func RuntimeImage(configMap, dir, want string) error {
	if want == "" {
		return errors.New("the release's image was not given (--image): the chart's test pod is broken")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "image"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the ConfigMap %s or its key image does not exist (nothing mounted at %s): the operator cannot build agent pods", configMap, filepath.Join(dir, "image"))
	}
	if err != nil {
		return fmt.Errorf("failed to read ConfigMap %s's key image: %w", configMap, err)
	}
	got := string(bytes.TrimSpace(raw))
	if got != want {
		return fmt.Errorf("it names %q: new agent pods would not run this release's image", got)
	}
	return nil
}

// Version checks that the running binary's version is the chart's appVersion.
func Version(binary, got, appVersion string) error {
	if appVersion == "" {
		return errors.New("the chart's appVersion was not given (--app-version): the chart's test pod is broken")
	}
	if got != appVersion {
		return fmt.Errorf("the image runs %s %s, but the chart's appVersion is %s: the pinned image tag is not this chart's build", binary, got, appVersion)
	}
	return nil
}

// Summary is one summary line of a release check, as found in a log.
type Summary struct {
	Chart          string
	Checks, Passed int
}

// OK reports whether the check ran something and everything passed.
func (s Summary) OK() bool { return s.Checks > 0 && s.Passed == s.Checks }

// summaryLine matches a summary anywhere on a line: a tool that relays the test's log (helmfile)
// may prefix it.
var summaryLine = regexp.MustCompile(`\brelease-check (\S+): (\d+) checks, (\d+) passed`)

// Summaries finds every summary line in out (e.g. the output of `helmfile test --logs`), in order.
func Summaries(out string) []Summary {
	var got []Summary
	for _, m := range summaryLine.FindAllStringSubmatch(out, -1) {
		checks, err1 := strconv.Atoi(m[2])
		passed, err2 := strconv.Atoi(m[3])
		if err1 != nil || err2 != nil {
			continue
		}
		got = append(got, Summary{Chart: m[1], Checks: checks, Passed: passed})
	}
	return got
}
