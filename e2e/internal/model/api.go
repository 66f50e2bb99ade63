package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The part of a Messages API request the stand-in reads. Fields it does not need (thinking,
// metadata, output_config, ...) are accepted and ignored, as by the real API for unknown betas.
type request struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   content           `json:"system"`
	Messages []message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type message struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

// content is a string or an array of blocks; a string is read as one text block.
type content struct {
	Blocks []block
}

func (c *content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		c.Blocks = []block{{Type: "text", Text: s}}
		return nil
	default:
		return json.Unmarshal(data, &c.Blocks)
	}
}

type block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	// tool_reference, inside a tool-search result: the tool whose schema the model now has
	ToolName string `json:"tool_name,omitempty"`
}

// tool is one entry of request.tools. A tool with defer_loading is named to the model but its
// schema is not given until the model asks for it with the tool-search tool.
type tool struct {
	Name         string `json:"name"`
	DeferLoading bool   `json:"defer_loading"`
}

// toolSearchTool is the agent CLI's tool for loading deferred tool schemas.
const toolSearchTool = "ToolSearch"

// deferredListIntro starts the system text in which the agent CLI names its deferred tools, one
// per line, when tool search is on.
const deferredListIntro = "The following deferred tools are now available via ToolSearch"

// offered is what one request gave the model.
type offered struct {
	// loaded are the tools whose schema was sent, in request order.
	loaded []string
	// deferred are the tools only named (defer_loading entries and the names of the system list).
	deferred []string
	// schemas is each tool's definition as sent, deferred ones included: a deferred tool's schema
	// reaches the model once a tool-search result references it.
	schemas map[string]json.RawMessage
}

func readOffered(r *request) (offered, error) {
	o := offered{loaded: []string{}, deferred: []string{}, schemas: map[string]json.RawMessage{}}
	seen := map[string]bool{}
	for i, raw := range r.Tools {
		var t tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return o, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if t.Name == "" {
			return o, fmt.Errorf("tools[%d]: name is empty", i)
		}
		o.schemas[t.Name] = raw
		if !t.DeferLoading && !seen[t.Name] {
			seen[t.Name] = true
			o.loaded = append(o.loaded, t.Name)
		}
	}
	var named []string
	for _, raw := range r.Tools {
		var t tool
		_ = json.Unmarshal(raw, &t)
		if t.DeferLoading {
			named = append(named, t.Name)
		}
	}
	texts := append([]block(nil), r.System.Blocks...)
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "user" {
			texts = append(texts, m.Content.Blocks...)
		}
	}
	for _, b := range texts {
		if b.Type == "text" {
			named = append(named, deferredNames(b.Text)...)
		}
	}
	for _, n := range named {
		if !seen[n] {
			seen[n] = true
			o.deferred = append(o.deferred, n)
		}
	}
	return o, nil
}

// deferredNames reads the tool names listed after deferredListIntro, up to the first line that is
// not a tool name.
func deferredNames(text string) []string {
	i := strings.Index(text, deferredListIntro)
	if i < 0 {
		return nil
	}
	lines := strings.Split(text[i:], "\n")
	var names []string
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		if !isToolName(l) {
			break
		}
		names = append(names, l)
	}
	return names
}

func isToolName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// progress is how far the conversation in a request has followed its script.
type progress struct {
	// calls is the number of script calls the model made (tool-search calls are not steps).
	calls int
	// searched are the tools the model loaded with the tool-search tool.
	searched map[string]bool
	// toolErrors are the script calls whose result was an error, as "<tool>: <result>".
	toolErrors []string
	// newResults are the tool results the request's last message brings, as "<tool>: <result>"
	// (each cut to maxResultText), so a test can read what the agent's own tools returned.
	newResults []string
}

// maxResultText bounds each recorded tool result.
const maxResultText = 2048

func readProgress(msgs []message) progress {
	p := progress{searched: map[string]bool{}}
	names := map[string]string{} // tool_use id -> tool
	for i, m := range msgs {
		for _, b := range m.Content.Blocks {
			if i == len(msgs)-1 && m.Role == "user" && b.Type == "tool_result" {
				if name, ok := names[b.ToolUseID]; ok && name != toolSearchTool {
					p.newResults = append(p.newResults, name+": "+truncate(resultText(b.Content), maxResultText))
				}
			}
			switch {
			case m.Role == "assistant" && b.Type == "tool_use" && b.Name == toolSearchTool:
				var in struct {
					Query string `json:"query"`
				}
				_ = json.Unmarshal(b.Input, &in)
				if sel, ok := strings.CutPrefix(in.Query, "select:"); ok {
					for _, n := range strings.Split(sel, ",") {
						p.searched[strings.TrimSpace(n)] = true
					}
				}
			case m.Role == "assistant" && b.Type == "tool_use":
				p.calls++
				names[b.ID] = b.Name
			case m.Role == "user" && b.Type == "tool_result" && b.IsError:
				if name, ok := names[b.ToolUseID]; ok {
					p.toolErrors = append(p.toolErrors, name+": "+truncate(resultText(b.Content), 300))
				}
			}
		}
	}
	return p
}

// resultText is a tool_result's content as text: a string, or its text blocks joined.
func resultText(raw json.RawMessage) string {
	text, _ := resultParts(raw)
	return text
}

// resultParts splits a tool_result's content into its text and the tools it references (a
// tool-search result loads schemas that way).
func resultParts(raw json.RawMessage) (string, []string) {
	var c content
	if json.Unmarshal(raw, &c) != nil {
		return string(raw), nil
	}
	var parts, refs []string
	for _, b := range c.Blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_reference":
			refs = append(refs, b.ToolName)
		}
	}
	return strings.Join(parts, "\n"), refs
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
