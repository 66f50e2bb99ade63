// Package model is the stand-in for the language model behind the real agent CLI: a Messages API
// server that answers by following a script carried in the agent's prompt (the Task's directive),
// and records what each request gave the model, so tests see exactly the tools the model was
// offered. It is the only test double of the end-to-end runs; the agent CLI, the MCP server and
// the wrapper are the real ones.
package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ScriptHeader starts a script: the first line of a directive the model follows, as
// "tatara-model-script id=<id>". The id keys the recorded requests.
const ScriptHeader = "tatara-model-script"

// MCPToolPrefix is how the agent CLI names the tools of the MCP server keyed "tatara".
const MCPToolPrefix = "mcp__tatara__"

// Step is one model turn of a script.
type Step struct {
	// Tool is the full tool name for a call step, empty for a say step.
	Tool string
	// Input is the call's arguments (a JSON object).
	Input json.RawMessage
	// Text is what a say step answers; it ends the run.
	Text string
}

// Script is a parsed directive.
type Script struct {
	ID    string
	Steps []Step
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Limits on a script, so a hostile prompt costs bounded work.
const (
	maxSteps     = 200
	maxStepInput = 256 << 10
)

// ParseScript reads a script from text. Lines:
//
//	tatara-model-script id=<id>    the header (first non-empty line)
//	call <tool> <json object>      a tool_use; a lowercase name without "__" is a tatara tool
//	                               (mcp__tatara__<tool>), any other name (Bash, mcp__x__y) is used as is
//	say <text>                     a final text answer; nothing after it runs
//	# ...                          a comment
func ParseScript(text string) (Script, error) {
	var s Script
	lines := strings.Split(text, "\n")
	header := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			header = i
			break
		}
	}
	if header < 0 {
		return s, errors.New("empty script")
	}
	fields := strings.Fields(lines[header])
	if len(fields) != 2 || fields[0] != ScriptHeader || !strings.HasPrefix(fields[1], "id=") {
		return s, fmt.Errorf("line %d: want %q, got %q", header+1, ScriptHeader+" id=<id>", lines[header])
	}
	s.ID = strings.TrimPrefix(fields[1], "id=")
	if !idPattern.MatchString(s.ID) {
		return s, fmt.Errorf("line %d: script id %q must match %s", header+1, s.ID, idPattern)
	}
	for i := header + 1; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		var st Step
		switch verb {
		case "call":
			name, input, _ := strings.Cut(rest, " ")
			if name == "" {
				return s, fmt.Errorf("line %d: call needs a tool name", i+1)
			}
			input = strings.TrimSpace(input)
			if input == "" {
				input = "{}"
			}
			if len(input) > maxStepInput {
				return s, fmt.Errorf("line %d: call input is %d bytes, over the %d-byte limit", i+1, len(input), maxStepInput)
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(input), &obj); err != nil {
				return s, fmt.Errorf("line %d: call %s input is not a JSON object: %w", i+1, name, err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(input)); err != nil {
				return s, fmt.Errorf("line %d: call %s input: %w", i+1, name, err)
			}
			st = Step{Tool: FullToolName(name), Input: compact.Bytes()}
		case "say":
			if rest == "" {
				return s, fmt.Errorf("line %d: say needs text", i+1)
			}
			st = Step{Text: rest}
		default:
			return s, fmt.Errorf("line %d: unknown step %q (want call or say)", i+1, verb)
		}
		if len(s.Steps) == maxSteps {
			return s, fmt.Errorf("line %d: more than %d steps", i+1, maxSteps)
		}
		s.Steps = append(s.Steps, st)
		if st.Tool == "" {
			break // say ends the run
		}
	}
	if len(s.Steps) == 0 {
		return s, errors.New("script has no steps")
	}
	return s, nil
}

// FullToolName is the name the agent CLI gives a script's tool.
func FullToolName(name string) string {
	if strings.Contains(name, "__") || name[0] < 'a' || name[0] > 'z' {
		return name
	}
	return MCPToolPrefix + name
}

// findScript returns the script in the first user text block that holds one. The agent CLI puts
// its own reminders in blocks of their own before the prompt, so the header can be searched for
// at the start of a block.
func findScript(msgs []message) (Script, bool, error) {
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Content.Blocks {
			if b.Type != "text" {
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(b.Text), ScriptHeader) {
				s, err := ParseScript(b.Text)
				return s, true, err
			}
		}
		return Script{}, false, nil // only the first user message carries the prompt
	}
	return Script{}, false, nil
}
