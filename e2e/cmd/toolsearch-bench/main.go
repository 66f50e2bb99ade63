// Command toolsearch-bench measures what the agent CLI's tool search costs: for each
// ENABLE_TOOL_SEARCH mode (true, auto, false) and k = 1, 5, 10 distinct tatara tools, the real
// agent CLI runs one scripted task against the model stand-in (in process) and a real `tatara
// mcp` (one profile), and the table gives the model turns and the input tokens the model received
// over the whole run, counted with the o200k_base BPE from the recorded requests. Each figure is
// also given as a ratio to mode false in the same run. `make bench-tool-search` runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"tatara.dev/e2e/internal/model"
)

// benchTools are the tools a run calls, first k of them: read-only tools of every profile, whose
// calls fail fast here (no backend is configured), so each result is a short error text in every
// mode alike.
var benchTools = []string{"task_get", "project_get", "repo_list", "code_search", "search_memories",
	"list_memories", "get_memory", "code_stats", "code_entity", "search_entities"}

var modes = []string{"true", "auto", "false"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "toolsearch-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	claude := flag.String("claude", "", "the agent CLI executable (hack/claude-code.sh prints it)")
	tatara := flag.String("tatara", "", "the tatara binary (make build: bin/tatara)")
	profile := flag.String("profile", "implement", "tool profile of the MCP server")
	flag.Parse()
	if *claude == "" || *tatara == "" {
		return errors.New("--claude and --tatara are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	srv, err := model.NewServer("bench-key", slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	api := httptest.NewServer(srv.Handler())
	defer api.Close()

	mcpURL, stop, err := startMCP(ctx, *tatara, *profile)
	if err != nil {
		return err
	}
	defer stop()

	work, err := os.MkdirTemp("", "toolsearch-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	mcpConfig := filepath.Join(work, "mcp.json")
	cfg := fmt.Sprintf(`{"mcpServers":{"tatara":{"type":"http","url":%q}}}`, mcpURL)
	if err := os.WriteFile(mcpConfig, []byte(cfg), 0o600); err != nil {
		return err
	}

	type row struct {
		mode          string
		k             int
		turns, counts int
		tokens        int
		schemaTokens  int
	}
	var rows []row
	for _, k := range []int{1, 5, 10} {
		for _, mode := range modes {
			id := fmt.Sprintf("bench-%s-%d", mode, k)
			if err := runAgent(ctx, *claude, api.URL, mcpConfig, filepath.Join(work, id), mode, script(id, k)); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			recs, err := records(api.URL, id)
			if err != nil {
				return err
			}
			r := row{mode: mode, k: k}
			calls := 0
			for _, rec := range recs {
				if rec.Error != "" {
					return fmt.Errorf("%s: request %d: %s", id, rec.Seq, rec.Error)
				}
				if rec.Endpoint == "count_tokens" {
					r.counts++
					continue
				}
				r.turns++
				r.tokens += rec.InputTokens
				r.schemaTokens = max(r.schemaTokens, rec.TataraSchemaTokens)
				if strings.HasPrefix(rec.Answer, "tool_use "+model.MCPToolPrefix) {
					calls++
				}
			}
			if calls != k {
				return fmt.Errorf("%s: the model called %d tatara tools, want %d", id, calls, k)
			}
			rows = append(rows, r)
		}
	}
	// The agent CLI's own count_tokens calls (mode auto) carry no script: count them apart.
	all, err := records(api.URL, "")
	if err != nil {
		return err
	}

	fmt.Printf("Tool search cost: Claude Code, profile %s, o200k_base tokens over the whole run (ratio to mode false at the same k)\n\n", *profile)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "k\tENABLE_TOOL_SEARCH\tmodel turns\tinput tokens\tratio\ttatara schemas (last turn)\t")
	for _, r := range rows {
		var base row
		for _, b := range rows {
			if b.k == r.k && b.mode == "false" {
				base = b
			}
		}
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.2f\t%d\t\n", r.k, r.mode, r.turns, r.tokens, float64(r.tokens)/float64(base.tokens), r.schemaTokens)
	}
	_ = tw.Flush()
	fmt.Printf("\ncount_tokens requests made by the CLI (mode auto, not model turns): %d\n", countTokensRequests(all))
	return nil
}

func countTokensRequests(recs []model.Record) int {
	n := 0
	for _, r := range recs {
		if r.Endpoint == "count_tokens" {
			n++
		}
	}
	return n
}

func script(id string, k int) string {
	lines := []string{model.ScriptHeader + " id=" + id}
	for _, tool := range benchTools[:k] {
		lines = append(lines, "call "+tool+" {}")
	}
	return strings.Join(append(lines, "say done"), "\n")
}

func runAgent(ctx context.Context, claude, apiURL, mcpConfig, home, mode, prompt string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, claude, "-p", "--output-format", "stream-json", "--verbose",
		"--mcp-config="+mcpConfig, "--strict-mcp-config", "--permission-mode", "bypassPermissions", "--", prompt)
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + apiURL, "ANTHROPIC_API_KEY=bench-key", "ENABLE_TOOL_SEARCH=" + mode,
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	if os.Getuid() == 0 {
		// The CLI refuses bypassPermissions as root unless told it is sandboxed; agent pods run as
		// 65532 and never need this.
		cmd.Env = append(cmd.Env, "IS_SANDBOX=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("agent CLI: %w\n%s", err, tail(out, 2000))
	}
	return nil
}

func startMCP(ctx context.Context, tatara, profile string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.CommandContext(ctx, tatara, "mcp", "--transport", "http", "--listen", addr,
		"--metrics-addr", "127.0.0.1:0", "--tool-profile", profile)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start tatara mcp: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return "http://" + addr + "/mcp", stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("tatara mcp did not listen on %s within 20s", addr)
}

func records(apiURL, script string) ([]model.Record, error) {
	u := apiURL + "/recorded"
	if script != "" {
		u += "?script=" + script
	}
	resp, err := http.Get(u) //nolint:gosec,noctx // the in-process stand-in on 127.0.0.1
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out model.Records
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode /recorded: %w", err)
	}
	return out.Records, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
