package modelgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Reading what a response used as it passes: a stream line by line, a JSON body whole.

// Bounds of what a meter holds. An SSE line longer than maxLineBytes is skipped unread: the
// events that carry usage (message_start, message_delta) are a few hundred bytes, and only
// content deltas grow long. A JSON body longer than maxJSONBytes is not metered: a non-streamed
// message of the longest output the API allows is well below it.
const (
	maxLineBytes = 256 << 10
	maxJSONBytes = 8 << 20
)

// apiUsage is the usage object of the model API's responses: message_start's message.usage,
// message_delta's usage, a non-streamed message's usage.
type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// merge keeps the larger of each count. A message's counts only grow as it streams: every
// message_delta repeats the cumulative output count, and may repeat the input counts, so the
// largest count seen is the message's, and adding them up would count tokens twice.
func (u *apiUsage) merge(v apiUsage) {
	u.InputTokens = max(u.InputTokens, v.InputTokens)
	u.OutputTokens = max(u.OutputTokens, v.OutputTokens)
	u.CacheCreationInputTokens = max(u.CacheCreationInputTokens, v.CacheCreationInputTokens)
	u.CacheReadInputTokens = max(u.CacheReadInputTokens, v.CacheReadInputTokens)
}

// reading is what a response said about itself.
type reading struct {
	model string // the model that answered; "" when the response named none
	usage apiUsage
	// errType and errMessage are the model API's error, when the response is one.
	errType, errMessage string
	// unmetered says why the response's usage could not be read, when it could not.
	unmetered string
}

// meter reads a response body's usage from its bytes, handed over in order as they pass.
type meter interface {
	write(p []byte)
	result() reading
}

// sseMeter reads a server-sent event stream line by line, as it arrives, holding no more than
// the current line.
type sseMeter struct {
	line     []byte
	skipping bool // the current line outgrew maxLineBytes: it is dropped up to its end
	r        reading
}

func (m *sseMeter) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.appendLine(p)
			return
		}
		m.appendLine(p[:i])
		if !m.skipping {
			m.parseLine(bytes.TrimSuffix(m.line, []byte("\r")))
		}
		m.line, m.skipping = m.line[:0], false
		p = p[i+1:]
	}
}

func (m *sseMeter) appendLine(p []byte) {
	switch {
	case m.skipping:
	case len(m.line)+len(p) > maxLineBytes:
		m.line, m.skipping = m.line[:0], true
	default:
		if need := len(m.line) + len(p); need > cap(m.line) {
			// Grown by hand: append's growth would overshoot the bound.
			grown := make([]byte, len(m.line), min(max(2*cap(m.line), need, 512), maxLineBytes))
			copy(grown, m.line)
			m.line = grown
		}
		m.line = append(m.line, p...)
	}
}

// streamEvent is the part of a stream event's data the meter reads.
type streamEvent struct {
	Type    string `json:"type"`
	Message struct {
		Model string   `json:"model"`
		Usage apiUsage `json:"usage"`
	} `json:"message"`
	Usage apiUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseLine reads one line of the stream. Only the data of message_start, message_delta and
// error events matters; the many content deltas are told apart without decoding them (a
// content delta that quotes those words is decoded and then ignored by its type).
func (m *sseMeter) parseLine(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || (!bytes.Contains(data, []byte(`"message_`)) && !bytes.Contains(data, []byte(`"error"`))) {
		return
	}
	var ev streamEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		m.r.model = ev.Message.Model
		m.r.usage.merge(ev.Message.Usage)
	case "message_delta":
		m.r.usage.merge(ev.Usage)
	case "error":
		m.r.errType, m.r.errMessage = ev.Error.Type, ev.Error.Message
	}
}

func (m *sseMeter) result() reading { return m.r }

// jsonMeter keeps a JSON body (a non-streamed message, count_tokens' answer, an error), up to
// maxJSONBytes, and reads it once it is complete.
type jsonMeter struct {
	buf      bytes.Buffer
	overflow bool
}

func (m *jsonMeter) write(p []byte) {
	switch {
	case m.overflow:
	case m.buf.Len()+len(p) > maxJSONBytes:
		m.buf, m.overflow = bytes.Buffer{}, true
	default:
		m.buf.Write(p)
	}
}

// jsonBody is the part of a non-streamed response the meter reads: a message's model and usage,
// or an error.
type jsonBody struct {
	Model string   `json:"model"`
	Usage apiUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (m *jsonMeter) result() reading {
	if m.overflow {
		return reading{unmetered: fmt.Sprintf("the JSON body exceeds %d bytes", maxJSONBytes)}
	}
	var b jsonBody
	if err := json.Unmarshal(m.buf.Bytes(), &b); err != nil {
		return reading{unmetered: "the JSON body does not parse: " + err.Error()}
	}
	r := reading{model: b.Model, errType: b.Error.Type, errMessage: b.Error.Message}
	r.usage.merge(b.Usage) // from zero: negative counts are dropped
	return r
}
