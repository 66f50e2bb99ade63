package agentstandin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// Exit codes besides the script's own.
const (
	ExitStepFailed = 1   // a call's transport failed or an expect did not hold
	ExitUsage      = 2   // bad flags or script
	ExitSignal     = 143 // SIGTERM, like a process the signal ended
)

// multiFlag collects repeated (or multi-value) flag occurrences.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type options struct {
	print, verbose, strictMCP, skipPerms bool
	noPersistence                        bool
	outputFormat, inputFormat            string
	sessionID, permissionMode, model     string
	settingSources                       string
	appendSystemPrompt                   string
	allowedTools, disallowedTools        multiFlag
	mcpConfig                            multiFlag
	maxTurns                             int
	prompt                               string
}

func parseFlags(args []string, stdin io.Reader) (options, error) {
	var o options
	fs := flag.NewFlagSet("agent-standin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.print, "p", false, "print mode")
	fs.BoolVar(&o.print, "print", false, "print mode")
	fs.BoolVar(&o.verbose, "verbose", false, "verbose")
	fs.StringVar(&o.outputFormat, "output-format", "text", "text, json or stream-json")
	fs.StringVar(&o.inputFormat, "input-format", "text", "text or stream-json")
	fs.Var(&o.mcpConfig, "mcp-config", "MCP config file or JSON (repeatable)")
	fs.BoolVar(&o.strictMCP, "strict-mcp-config", false, "only the --mcp-config servers")
	fs.StringVar(&o.sessionID, "session-id", "", "session id (a UUID)")
	fs.StringVar(&o.permissionMode, "permission-mode", "default", "permission mode")
	fs.StringVar(&o.settingSources, "setting-sources", "user,project,local", "comma-separated setting sources: user, project, local")
	fs.StringVar(&o.model, "model", "", "model")
	fs.StringVar(&o.appendSystemPrompt, "append-system-prompt", "", "extra system prompt")
	fs.Var(&o.allowedTools, "allowedTools", "allowed tools")
	fs.Var(&o.allowedTools, "allowed-tools", "allowed tools")
	fs.Var(&o.disallowedTools, "disallowedTools", "disallowed tools")
	fs.BoolVar(&o.skipPerms, "dangerously-skip-permissions", false, "skip permission prompts")
	fs.IntVar(&o.maxTurns, "max-turns", 0, "max turns")
	fs.BoolVar(&o.noPersistence, "no-session-persistence", false, "write no transcript")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("failed to parse flags: %w", err)
	}
	switch {
	case !o.print:
		return o, errors.New("failed to parse flags: the stand-in only supports print mode (-p)")
	case o.outputFormat != "text" && o.outputFormat != "json" && o.outputFormat != "stream-json":
		return o, fmt.Errorf("failed to parse flags: --output-format %q is not text, json or stream-json", o.outputFormat)
	case o.outputFormat == "stream-json" && !o.verbose:
		return o, errors.New("failed to parse flags: when using --print, --output-format=stream-json requires --verbose")
	}
	switch o.permissionMode {
	case "acceptEdits", "bypassPermissions", "default", "dontAsk", "plan":
	default:
		return o, fmt.Errorf("failed to parse flags: --permission-mode %q is not one of acceptEdits, bypassPermissions, default, dontAsk, plan", o.permissionMode)
	}
	for source := range strings.SplitSeq(o.settingSources, ",") {
		switch strings.TrimSpace(source) {
		case "user", "project", "local":
		default:
			return o, fmt.Errorf("failed to parse flags: --setting-sources %q: %q is not one of user, project, local", o.settingSources, source)
		}
	}
	if o.sessionID == "" {
		o.sessionID = uuid.NewString()
	} else if _, err := uuid.Parse(o.sessionID); err != nil {
		return o, fmt.Errorf("failed to parse flags: --session-id %q must be a valid UUID: %w", o.sessionID, err)
	}
	switch fs.NArg() {
	case 0:
		data, err := io.ReadAll(stdin)
		if err != nil {
			return o, fmt.Errorf("failed to read prompt from stdin: %w", err)
		}
		o.prompt = string(data)
	case 1:
		o.prompt = fs.Arg(0)
	default:
		return o, fmt.Errorf("failed to parse flags: want one prompt argument, got %d: %q", fs.NArg(), fs.Args())
	}
	return o, nil
}

// Main runs the stand-in and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stdin)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
		return ExitUsage
	}
	steps, err := Parse(o.prompt)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	r, err := newRunner(ctx, o, stdout, stderr)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
		return ExitUsage
	}
	defer r.close()
	return r.run(ctx, steps)
}

type runner struct {
	o       options
	out     io.Writer
	errOut  io.Writer
	outMu   sync.Mutex
	tr      *transcript
	servers map[string]*mcpServer
	start   time.Time
	turns   int
	last    string
	lastOut string
}

func newRunner(ctx context.Context, o options, stdout, stderr io.Writer) (*runner, error) {
	cfgs, err := loadMCPConfig(o.mcpConfig)
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("failed to read working directory: %w", err)
	}
	configDir := os.Getenv("CLAUDE_CONFIG_DIR")
	if configDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("failed to find home directory: %w", err)
		}
		configDir = filepath.Join(home, ".claude")
	}
	r := &runner{o: o, out: stdout, errOut: stderr, servers: map[string]*mcpServer{}, start: time.Now()}
	// Like the agent CLI: an inherited child-session marker or the flag turns saving off.
	persist := !o.noPersistence && os.Getenv("CLAUDE_CODE_CHILD_SESSION") == ""
	r.tr = &transcript{
		disabled: !persist,
		path:     TranscriptPath(configDir, cwd, o.sessionID), cwd: cwd, session: o.sessionID,
		createDelay: envDuration("STANDIN_CREATE_DELAY", 300*time.Millisecond),
		splitEvery:  envInt("STANDIN_SPLIT_EVERY", 3),
		splitPause:  envDuration("STANDIN_SPLIT_PAUSE", 50*time.Millisecond),
		echo:        r.emit,
	}
	var wg sync.WaitGroup
	for name, c := range cfgs {
		s := &mcpServer{name: name, cfg: c}
		r.servers[name] = s
		wg.Add(1)
		go func() { defer wg.Done(); s.connect(ctx) }()
	}
	wg.Wait()
	r.init(ctx)
	return r, nil
}

func (r *runner) close() {
	r.tr.close()
	for _, s := range r.servers {
		if s.client != nil {
			_ = s.client.Close()
		}
	}
}

// emit prints one stream-json event (stream-json mode only).
func (r *runner) emit(ev map[string]any) {
	if r.o.outputFormat != "stream-json" {
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, _ = r.out.Write(append(data, '\n'))
}

func (r *runner) init(ctx context.Context) {
	names := make([]string, 0, len(r.servers))
	for n := range r.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var status []map[string]string
	tools := []string{}
	for _, n := range names {
		s := r.servers[n]
		status = append(status, map[string]string{"name": n, "status": s.status()})
		if s.err != nil {
			_, _ = fmt.Fprintf(r.errOut, "MCP server %q: %v\n", n, s.err)
			continue
		}
		// Like the agent CLI, init lists every MCP tool under its prefixed name.
		names, err := s.listTools(ctx)
		if err != nil {
			_, _ = fmt.Fprintf(r.errOut, "MCP server %q: %v\n", n, err)
			continue
		}
		for _, t := range names {
			tools = append(tools, toolPrefix(n)+t)
		}
	}
	r.emit(map[string]any{
		"type": "system", "subtype": "init", "cwd": r.tr.cwd, "session_id": r.o.sessionID,
		"tools": tools, "mcp_servers": status, "model": "standin", "permissionMode": r.o.permissionMode,
		"apiKeySource": "none", "claude_code_version": Version,
	})
}

func (r *runner) run(ctx context.Context, steps []Step) int {
	code := r.steps(ctx, steps)
	if ctx.Err() != nil {
		code = ExitSignal
	}
	subtype := "success"
	if code != 0 {
		subtype = "error_during_execution"
	}
	r.emit(map[string]any{
		"type": "result", "subtype": subtype, "is_error": code != 0,
		"duration_ms": time.Since(r.start).Milliseconds(), "duration_api_ms": 0,
		"num_turns": r.turns, "result": r.last, "session_id": r.o.sessionID, "total_cost_usd": 0,
		"usage": map[string]int{"input_tokens": 0, "output_tokens": 0},
	})
	if r.o.outputFormat == "text" {
		_, _ = fmt.Fprintln(r.out, r.last)
	}
	return code
}

func (r *runner) steps(ctx context.Context, steps []Step) int {
	if err := r.tr.prompt(r.o.prompt); err != nil {
		_, _ = fmt.Fprintln(r.errOut, "Error:", err)
		return ExitStepFailed
	}
	for _, st := range steps {
		if ctx.Err() != nil {
			return ExitSignal
		}
		code, err := r.step(ctx, st)
		if err != nil {
			if ctx.Err() != nil {
				return ExitSignal
			}
			_, _ = fmt.Fprintf(r.errOut, "Error: script line %d (%s): %v\n", st.Line, st.Op, err)
			return ExitStepFailed
		}
		if code >= 0 {
			return code
		}
	}
	return 0
}

// step runs one step; code >= 0 ends the script with that code.
func (r *runner) step(ctx context.Context, st Step) (int, error) {
	switch st.Op {
	case "say":
		r.last = st.Text
		return -1, r.assistant(textBlock{Type: "text", Text: st.Text})
	case "think":
		return -1, r.assistant(thinkingBlock{Type: "thinking", Thinking: st.Text, Signature: "standin"})
	case "raw":
		return -1, r.tr.writeRaw([]byte(st.Text + "\n"))
	case "list-tools":
		s, _, err := resolve(r.servers, "tools")
		if err != nil {
			return -1, err
		}
		names, err := s.listTools(ctx)
		if err != nil {
			return -1, err
		}
		r.lastOut = fmt.Sprintf("tools (%d): %s", len(names), strings.Join(names, ", "))
		return -1, r.assistant(textBlock{Type: "text", Text: r.lastOut})
	case "call":
		s, tool, err := resolve(r.servers, st.Tool)
		if err != nil {
			return -1, err
		}
		id := toolUseID()
		if err := r.assistant(toolUseBlock{Type: "tool_use", ID: id, Name: toolPrefix(s.name) + tool, Input: st.Args}); err != nil {
			return -1, err
		}
		text, isErr, err := s.callTool(ctx, tool, st.Args)
		if err != nil {
			_ = r.tr.toolResult(id, err.Error(), true)
			return -1, err
		}
		r.lastOut = text
		return -1, r.tr.toolResult(id, text, isErr)
	case "emit-tool-use":
		id := toolUseID()
		if err := r.assistant(toolUseBlock{Type: "tool_use", ID: id, Name: st.Tool, Input: st.Args}); err != nil {
			return -1, err
		}
		return -1, r.tr.toolResult(id, "(stand-in: tool not executed)", false)
	case "expect":
		if !strings.Contains(r.lastOut, st.Text) {
			return -1, fmt.Errorf("expected %q in the last result, got %q", st.Text, cutText(r.lastOut, 500))
		}
		return -1, nil
	case "sleep":
		select {
		case <-time.After(st.Duration):
			return -1, nil
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	case "exit":
		return st.Code, nil
	}
	return -1, fmt.Errorf("unknown step %q", st.Op)
}

func (r *runner) assistant(block any) error {
	if r.tr.msgID == "" {
		r.turns++
	}
	return r.tr.assistant(block)
}

func toolUseID() string { return "toolu_standin_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20] }

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}
