package agentstandin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Step is one script line.
type Step struct {
	Line int
	Op   string
	// Text is the argument of say, think, expect and raw.
	Text string
	// Tool and Args are the arguments of call and emit-tool-use.
	Tool string
	Args json.RawMessage
	// Duration is sleep's argument; Code is exit's.
	Duration time.Duration
	Code     int
}

// Parse reads a script; the error names the line and what is wrong with it.
func Parse(script string) ([]Step, error) {
	var steps []Step
	for i, raw := range strings.Split(script, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		st := Step{Line: i + 1, Op: op}
		var err error
		switch op {
		case "say", "think", "expect":
			if rest == "" {
				err = fmt.Errorf("%s needs text", op)
			}
			st.Text = rest
		case "raw":
			st.Text = rest
			if strings.HasPrefix(rest, `"`) {
				if st.Text, err = strconv.Unquote(rest); err != nil {
					err = fmt.Errorf("raw text %s is not a valid Go string: %w", rest, err)
				}
			}
		case "list-tools":
			if rest != "" {
				err = fmt.Errorf("list-tools takes no argument, got %q", rest)
			}
		case "call", "emit-tool-use":
			st.Tool, st.Args, err = toolAndArgs(op, rest)
		case "sleep":
			if st.Duration, err = time.ParseDuration(rest); err != nil || st.Duration < 0 {
				err = fmt.Errorf("sleep needs a duration such as 500ms, got %q", rest)
			}
		case "exit":
			if st.Code, err = strconv.Atoi(rest); err != nil || st.Code < 0 || st.Code > 255 {
				err = fmt.Errorf("exit needs a code 0..255, got %q", rest)
			}
		default:
			err = fmt.Errorf("unknown step %q (want say, think, list-tools, call, expect, emit-tool-use, raw, sleep, exit)", op)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to parse script line %d %q: %w", i+1, line, err)
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("failed to parse script: no steps")
	}
	return steps, nil
}

func toolAndArgs(op, rest string) (string, json.RawMessage, error) {
	tool, args, _ := strings.Cut(rest, " ")
	if tool == "" {
		return "", nil, fmt.Errorf("%s needs a tool name", op)
	}
	args = strings.TrimSpace(args)
	if args == "" {
		return tool, json.RawMessage(`{}`), nil
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		if op == "emit-tool-use" && json.Valid([]byte(args)) {
			// Any JSON value is a valid (if odd) input to write: tests use it for bad inputs.
			return tool, json.RawMessage(args), nil
		}
		return "", nil, fmt.Errorf("%s arguments must be a JSON object, got %q: %w", op, args, err)
	}
	return tool, json.RawMessage(args), nil
}
