//go:build conformance

package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
// hack/conformance) against the real binary over streamable HTTP. make conformance installs the
// suite and runs this test (it is part of make test); the build tag keeps it out of a plain
// go test, which has no suite to run.

// EnvConformanceRunner is the suite's CLI, as hack/mcp-conformance.sh prints it.
const EnvConformanceRunner = "TATARA_MCP_CONFORMANCE"

// conformanceApplicable are the server scenarios that apply to a tools-only server: each must
// run and pass.
var conformanceApplicable = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"server-sse-polling",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
}

// conformanceNotApplicable are the scenarios that need what tatara mcp does not offer, by design:
// it serves tools only (no logging, completions, resources or prompts capability), and its tools
// are the platform's, not the suite's reference tools (test_simple_text, ...). They run and are
// reported, and never fail the test.
var conformanceNotApplicable = map[string]string{
	"logging-set-level":             "needs the logging capability",
	"completion-complete":           "needs the completions capability",
	"tools-call-simple-text":        "calls the suite's reference tool test_simple_text",
	"tools-call-image":              "calls the suite's reference tool test_image_content",
	"tools-call-audio":              "calls the suite's reference tool test_audio_content",
	"tools-call-embedded-resource":  "calls the suite's reference tool test_embedded_resource",
	"tools-call-mixed-content":      "calls the suite's reference tool test_multiple_content_types",
	"tools-call-with-logging":       "needs the logging capability and a reference tool",
	"tools-call-error":              "calls the suite's reference tool test_error_handling",
	"tools-call-with-progress":      "calls the suite's reference tool test_tool_with_progress",
	"tools-call-sampling":           "calls the suite's reference tool test_sampling (server-to-client sampling)",
	"tools-call-elicitation":        "calls the suite's reference tool test_elicitation (elicitation)",
	"json-schema-2020-12":           "lists the suite's reference tool json_schema_2020_12_tool",
	"elicitation-sep1034-defaults":  "calls the suite's reference tool test_elicitation_sep1034_defaults (elicitation)",
	"elicitation-sep1330-enums":     "calls the suite's reference tool test_elicitation_sep1330_enums (elicitation)",
	"resources-list":                "needs the resources capability",
	"resources-read-text":           "needs the resources capability",
	"resources-read-binary":         "needs the resources capability",
	"resources-templates-read":      "needs the resources capability",
	"resources-subscribe":           "needs the resources capability",
	"resources-unsubscribe":         "needs the resources capability",
	"prompts-list":                  "needs the prompts capability",
	"prompts-get-simple":            "needs the prompts capability",
	"prompts-get-with-args":         "needs the prompts capability",
	"prompts-get-embedded-resource": "needs the prompts capability",
	"prompts-get-with-image":        "needs the prompts capability",
}

// resultDir is one scenario's output directory: server-<scenario>-<timestamp>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

func TestMCPConformance(t *testing.T) {
	runner := os.Getenv(EnvConformanceRunner)
	if runner == "" {
		t.Fatalf("%s is not set: run make conformance (it installs the pinned suite)", EnvConformanceRunner)
	}
	for _, s := range conformanceApplicable {
		if _, twice := conformanceNotApplicable[s]; twice {
			t.Fatalf("scenario %s is both applicable and not applicable", s)
		}
	}
	// Every tool, so that tools-list sees every schema.
	p := startHTTPMCP(t, nil)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runner, "server", "--url", p.url, "--suite", "all", "-o", out)
	// The suite exits non-zero when any scenario fails, the not-applicable ones included: the
	// verdict is the per-scenario results below.
	output, runErr := cmd.CombinedOutput()
	t.Logf("conformance suite output:\n%s", output)

	entries, err := os.ReadDir(out)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the suite wrote no results (exit: %v, read: %v)", runErr, err)
	}
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			t.Errorf("unexpected entry %s in the suite's output", e.Name())
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Errorf("scenario %s: checks.json: %v", m[1], err)
			continue
		}
		results[m[1]] = append(results[m[1]], checks...)
	}

	var table []string
	names := make([]string, 0, len(results))
	for name := range results {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var failed []string
		for _, c := range results[name] {
			if c.Status == "FAILURE" {
				failed = append(failed, c.ID+": "+c.ErrorMessage)
			}
		}
		verdict := "pass"
		if len(failed) > 0 {
			verdict = "fail"
		}
		switch reason, na := conformanceNotApplicable[name]; {
		case slices.Contains(conformanceApplicable, name):
			table = append(table, name+"\tapplicable\t"+verdict)
			if len(failed) > 0 {
				t.Errorf("applicable scenario %s failed: %s", name, strings.Join(failed, "; "))
			}
		case na:
			table = append(table, name+"\tnot applicable\t"+verdict+"\t"+reason)
		default:
			table = append(table, name+"\tUNCLASSIFIED\t"+verdict)
			t.Errorf("scenario %s is new: classify it in conformanceApplicable or conformanceNotApplicable", name)
		}
	}
	for _, name := range conformanceApplicable {
		if _, ran := results[name]; !ran {
			t.Errorf("applicable scenario %s did not run", name)
		}
	}
	t.Logf("scenario\tclass\tresult\treason\n%s", strings.Join(table, "\n"))
}
