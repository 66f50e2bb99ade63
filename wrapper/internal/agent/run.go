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
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"tatara.dev/cli/pkg/redact"
	"tatara.dev/wrapper/internal/pid1"
)

// Process is one run of the agent CLI.
type Process struct {
	Command string
	Args    []string
	Env     []string
	Dir     string
	Log     *slog.Logger
	Red     *redact.Redactor

	cmd        *exec.Cmd
	pid        int // cmd.Process.Pid, which Release overwrites
	exit       <-chan unix.WaitStatus
	exited     atomic.Bool
	started    time.Time
	wg         sync.WaitGroup
	outR, errR *os.File

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

// Start starts the process in its own process group; stdout (stream-json) and stderr are read
// and logged. The process reaper (pid1) waits for it, as for every child of the wrapper.
func (p *Process) Start() error {
	cmd := exec.Command(p.Command, p.Args...) //nolint:gosec // running the configured agent is this package's job
	cmd.Env = p.Env
	cmd.Dir = p.Dir
	// A group of its own: a signal reaches the agent and everything it started (kill(-pgid)).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Pipes as files: exec starts no copying goroutines, which only cmd.Wait would end, and the
	// reaper, not cmd.Wait, waits for the agent.
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("failed to create the agent's stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return fmt.Errorf("failed to create the agent's stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	exit, err := pid1.ProcessReaper().Start(cmd)
	// The agent has its own copies; the wrapper's would keep the pipes open after it exits.
	_, _ = outW.Close(), errW.Close()
	if err != nil {
		_, _ = outR.Close(), errR.Close()
		return fmt.Errorf("failed to start agent %q: %w", p.Command, err)
	}
	p.cmd, p.pid, p.exit, p.started, p.outR, p.errR = cmd, cmd.Process.Pid, exit, time.Now(), outR, errR
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.readStdout(outR) }()
	go func() { defer p.wg.Done(); p.readStderr(errR) }()
	return nil
}

// PID is the agent's process id, which is also its process group id.
func (p *Process) PID() int { return p.pid }

// Signal forwards sig to the agent's process group: the agent and every process it started that
// stayed in the group. An agent that left the group (setpgid, setsid) still gets sig itself.
func (p *Process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("failed to signal agent %q: %v is not a system signal", p.Command, sig)
	}
	pid := p.pid
	if pid <= 0 { // kill(0) and kill(-1) would signal the wrapper's own group, or every process
		return fmt.Errorf("failed to signal agent %q: it was not started", p.Command)
	}
	groupErr := unix.Kill(-pid, s)
	if !p.exited.Load() {
		// The agent is not reaped yet (or only just: its PID is not reused that soon), so pid is
		// still the agent's.
		if pgid, err := unix.Getpgid(pid); err == nil && pgid != pid {
			if err := unix.Kill(pid, s); err != nil {
				return fmt.Errorf("failed to signal agent %q (PID %d, outside its group): %w", p.Command, pid, err)
			}
			return nil
		}
	}
	if groupErr != nil {
		return fmt.Errorf("failed to signal agent %q process group %d: %w", p.Command, pid, groupErr)
	}
	return nil
}

// Wait waits for the agent to exit and for its output to be read.
func (p *Process) Wait() (Result, error) {
	ws := <-p.exit
	p.exited.Store(true)
	res := Result{Duration: time.Since(p.started)}
	_ = p.cmd.Process.Release() // its pidfd; Wait is never called, the reaper has the status
	p.waitOutput()
	p.mu.Lock()
	res.Final = p.result
	p.mu.Unlock()
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = ws.Signal().String()
	default:
		return res, fmt.Errorf("failed to wait for agent %q: wait status %#x is neither an exit nor a signal", p.Command, uint32(ws))
	}
	return res, nil
}

// waitOutput waits until the agent's output is read to its end. A background child of the agent
// may hold stdout or stderr open for good; after outputGrace the pipes are closed, which ends the
// reads, so it cannot hang the wrapper.
func (p *Process) waitOutput() {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(outputGrace):
		_, _ = p.outR.Close(), p.errR.Close()
		<-done
	}
	_, _ = p.outR.Close(), p.errR.Close()
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
