package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"tatara.dev/cli/pkg/redact"
)

// Process is one run of the agent CLI.
type Process struct {
	Command string
	Args    []string
	Env     []string
	Dir     string
	Log     *slog.Logger
	Red     *redact.Redactor

	cmd     *exec.Cmd
	started time.Time
	wg      sync.WaitGroup
	outW    *io.PipeWriter
	errW    *io.PipeWriter

	mu     sync.Mutex
	init   *StreamEvent
	result *StreamEvent
}

// StreamEvent is the part of a stream-json stdout event the wrapper reads: the system/init event
// (MCP server status) and the final result event.
type StreamEvent struct {
	Type         string      `json:"type"`
	Subtype      string      `json:"subtype"`
	SessionID    string      `json:"session_id"`
	IsError      bool        `json:"is_error"`
	NumTurns     int         `json:"num_turns"`
	DurationMS   int64       `json:"duration_ms"`
	TotalCostUSD float64     `json:"total_cost_usd"`
	Tools        []string    `json:"tools"`
	MCPServers   []MCPStatus `json:"mcp_servers"`
}

// MCPStatus is one server's connection status in system/init.
type MCPStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Result is how the agent ended.
type Result struct {
	// ExitCode is the process's exit code, or 128+signal when a signal ended it.
	ExitCode int
	Signal   string
	Duration time.Duration
	// Final is the stream-json result event, nil if the agent printed none.
	Final *StreamEvent
}

// Start starts the process; stdout (stream-json) and stderr are read and logged.
func (p *Process) Start() error {
	cmd := exec.Command(p.Command, p.Args...) //nolint:gosec // running the configured agent is this package's job
	cmd.Env = p.Env
	cmd.Dir = p.Dir
	// Writers that are not files make exec copy the output in its own goroutines, which
	// WaitDelay bounds: a tool's background child holding stdout open cannot hang the wrapper
	// after the agent exits.
	stdout, outW := io.Pipe()
	stderr, errW := io.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.WaitDelay = outputGrace
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start agent %q: %w", p.Command, err)
	}
	p.cmd, p.started, p.outW, p.errW = cmd, time.Now(), outW, errW
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.readStdout(stdout) }()
	go func() { defer p.wg.Done(); p.readStderr(stderr) }()
	return nil
}

// PID is the agent's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal forwards sig to the agent.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("failed to signal agent %q: %w", p.Command, err)
	}
	return nil
}

// Wait waits for the agent to exit and for its output to be read.
func (p *Process) Wait() (Result, error) {
	err := p.cmd.Wait()
	res := Result{Duration: time.Since(p.started)}
	_ = p.outW.Close()
	_ = p.errW.Close()
	p.wg.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		// Exited cleanly; only a leftover child kept the output open.
		err = nil
	}
	p.mu.Lock()
	res.Final = p.result
	p.mu.Unlock()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
			res.Signal = ws.Signal().String()
		}
		return res, nil
	default:
		return res, fmt.Errorf("failed to wait for agent %q: %w", p.Command, err)
	}
}

// outputGrace is how long output is still read after the agent exited.
const outputGrace = 5 * time.Second

// maxStreamLine bounds the stdout line the wrapper decodes; the events it wants are small, and
// the rest of stdout repeats the transcript, which the tailer reads.
const maxStreamLine = 1 << 20

func (p *Process) readStdout(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > maxStreamLine:
			tooLong, line = true, line[:0]
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong {
			p.handleStdoutLine(bytes.TrimSpace(line))
		}
		line, tooLong = line[:0], false
		if err != nil {
			return
		}
	}
}

func (p *Process) handleStdoutLine(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	// Cheap pre-check: only system and result events are decoded.
	if !bytes.Contains(line, []byte(`"system"`)) && !bytes.Contains(line, []byte(`"result"`)) {
		return
	}
	var ev StreamEvent
	if json.Unmarshal(line, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "system" && ev.Subtype == "init":
		p.mu.Lock()
		p.init = &ev
		p.mu.Unlock()
		attrs := []slog.Attr{slog.Int("tools", len(ev.Tools)), slog.String("agent_session_id", ev.SessionID)}
		level := slog.LevelInfo
		found := false
		for _, s := range ev.MCPServers {
			attrs = append(attrs, slog.String("mcp_"+s.Name, s.Status))
			if s.Name == MCPServerName {
				found = true
				if s.Status != "connected" {
					level = slog.LevelWarn
				}
			}
		}
		if !found {
			level = slog.LevelWarn
		}
		p.Log.LogAttrs(context.Background(), level, "agent initialized", attrs...)
	case ev.Type == "result":
		p.mu.Lock()
		p.result = &ev
		p.mu.Unlock()
	}
}

const (
	// maxStderrLine is the unit the redactor sees: a stderr line is masked whole up to this size,
	// so a secret is only at risk of being split if it straddles a 1 MiB boundary.
	maxStderrLine = 1 << 20
	// maxStderrRecord bounds one logged record; a longer (already masked) line is logged as
	// numbered parts, so nothing is dropped.
	maxStderrRecord = 4 << 10
)

func (p *Process) readStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		full := errors.Is(err, bufio.ErrBufferFull)
		if full && len(line) < maxStderrLine {
			continue
		}
		p.logStderrLine(bytes.TrimRight(line, "\r\n"))
		line = line[:0]
		if err != nil && !full {
			return
		}
	}
}

// logStderrLine masks secrets in the whole line, then logs it in records of at most
// maxStderrRecord bytes, cut on UTF-8 boundaries.
func (p *Process) logStderrLine(line []byte) {
	if len(line) == 0 {
		return
	}
	masked := p.Red.String(string(line))
	if len(masked) <= maxStderrRecord {
		p.Log.Warn("agent stderr", slog.String("line", masked))
		return
	}
	var parts []string
	for rest := masked; rest != ""; {
		n := min(len(rest), maxStderrRecord)
		// Cut before a rune that the edge would split; invalid UTF-8 may have no rune start
		// nearby, and is then cut at the edge.
		if n < len(rest) && !utf8.RuneStart(rest[n]) {
			for k := n - 1; k > 0 && k > n-utf8.UTFMax; k-- {
				if utf8.RuneStart(rest[k]) {
					n = k
					break
				}
			}
		}
		parts = append(parts, rest[:n])
		rest = rest[n:]
	}
	for i, part := range parts {
		p.Log.Warn("agent stderr", slog.String("line", part), slog.Int("part", i+1), slog.Int("parts", len(parts)))
	}
}
