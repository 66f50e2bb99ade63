package agentstandin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/google/uuid"
)

// Version is what the stand-in reports as the agent CLI's version in transcript lines.
const Version = "2.0.31-standin"

// line is one transcript record, fields in the agent CLI's order.
type line struct {
	ParentUUID    *string         `json:"parentUuid"`
	IsSidechain   bool            `json:"isSidechain"`
	UserType      string          `json:"userType"`
	Cwd           string          `json:"cwd"`
	SessionID     string          `json:"sessionId"`
	Version       string          `json:"version"`
	GitBranch     string          `json:"gitBranch"`
	Type          string          `json:"type"`
	Message       any             `json:"message"`
	RequestID     string          `json:"requestId,omitempty"`
	UUID          string          `json:"uuid"`
	Timestamp     string          `json:"timestamp"`
	ToolUseResult json.RawMessage `json:"toolUseResult,omitempty"`
}

type assistantMessage struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	ToolUseID string `json:"tool_use_id"`
	Type      string `json:"type"`
	Content   []any  `json:"content"`
	IsError   bool   `json:"is_error"`
}

var nonSlug = regexp.MustCompile(`[^A-Za-z0-9]`)

// Slug is the agent CLI's project directory name for cwd. Only the writer needs it: readers
// find the file by session id.
func Slug(cwd string) string { return nonSlug.ReplaceAllString(cwd, "-") }

// TranscriptPath is where the transcript of session goes.
func TranscriptPath(configDir, cwd, session string) string {
	return filepath.Join(configDir, "projects", Slug(cwd), session+".jsonl")
}

// transcript writes lines the way the agent CLI does, and echoes each as a stream-json event.
type transcript struct {
	path        string
	cwd         string
	session     string
	createDelay time.Duration
	splitEvery  int
	splitPause  time.Duration
	echo        func(ev map[string]any)
	disabled    bool

	file   *os.File
	parent *string
	n      int
	// msgID is the id of the assistant reply in progress; a tool result ends the reply.
	msgID string
}

func (t *transcript) write(typ string, msg any, toolUseResult json.RawMessage) error {
	id := uuid.NewString()
	l := line{
		ParentUUID: t.parent, UserType: "external", Cwd: t.cwd, SessionID: t.session,
		Version: Version, GitBranch: "", Type: typ, Message: msg, UUID: id,
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), ToolUseResult: toolUseResult,
	}
	if typ == "assistant" {
		l.RequestID = "req_standin_" + t.msgID
	}
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("failed to encode transcript line: %w", err)
	}
	if err := t.writeRaw(append(data, '\n')); err != nil {
		return err
	}
	t.parent = &id
	if t.echo != nil {
		t.echo(map[string]any{"type": typ, "message": msg, "parent_tool_use_id": nil, "session_id": t.session, "uuid": id})
	}
	return nil
}

// writeRaw appends data (one line, '\n' included), creating the file late on first use and
// splitting every splitEvery-th line into two writes.
func (t *transcript) writeRaw(data []byte) error {
	if t.disabled {
		return nil
	}
	if t.file == nil {
		time.Sleep(t.createDelay)
		if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
			return fmt.Errorf("failed to create transcript dir %q: %w", filepath.Dir(t.path), err)
		}
		f, err := os.OpenFile(t.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("failed to create transcript %q: %w", t.path, err)
		}
		t.file = f
	}
	t.n++
	if t.splitEvery > 0 && t.n%t.splitEvery == 0 && len(data) > 2 {
		half := len(data) / 2
		if _, err := t.file.Write(data[:half]); err != nil {
			return fmt.Errorf("failed to write transcript %q: %w", t.path, err)
		}
		time.Sleep(t.splitPause)
		data = data[half:]
	}
	if _, err := t.file.Write(data); err != nil {
		return fmt.Errorf("failed to write transcript %q: %w", t.path, err)
	}
	return nil
}

func (t *transcript) close() {
	if t.file != nil {
		_ = t.file.Close()
	}
}

func (t *transcript) assistant(block any) error {
	if t.msgID == "" {
		t.msgID = "msg_standin_" + uuid.NewString()[:8]
	}
	return t.write("assistant", assistantMessage{
		ID: t.msgID, Type: "message", Role: "assistant", Model: "standin", Content: []any{block},
		Usage: usage{InputTokens: 10, OutputTokens: 5},
	}, nil)
}

func (t *transcript) prompt(text string) error {
	return t.write("user", userMessage{Role: "user", Content: text}, nil)
}

func (t *transcript) toolResult(toolUseID, text string, isError bool) error {
	t.msgID = ""
	res, _ := json.Marshal([]textBlock{{Type: "text", Text: text}})
	return t.write("user", userMessage{Role: "user", Content: []any{toolResultBlock{
		ToolUseID: toolUseID, Type: "tool_result", Content: []any{textBlock{Type: "text", Text: text}}, IsError: isError,
	}}}, res)
}
