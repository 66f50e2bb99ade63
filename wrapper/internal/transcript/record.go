package transcript

import (
	"bytes"
	"encoding/json"
)

// record is the part of one transcript line the wrapper reads. Fields it does not name
// (toolUseResult, tool_result content, ...) are skipped by encoding/json without being copied,
// which is what keeps lines of hundreds of KiB cheap.
type record struct {
	Type        string  `json:"type"`
	Subtype     string  `json:"subtype"`
	UUID        string  `json:"uuid"`
	SessionID   string  `json:"sessionId"`
	IsSidechain bool    `json:"isSidechain"`
	AgentID     string  `json:"agentId"`
	Message     message `json:"message"`

	// prompt is message.content when it is a string (set by parseRecord).
	prompt preview
}

type message struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	Model      string `json:"model"`
	StopReason string `json:"stop_reason"`
	// Content is a block array for assistant lines and tool results, a plain string for a user
	// prompt. A string lands here as a type error that parseRecord catches; decoding it through a
	// custom type instead would cost one more pass over every large block array.
	Content []block `json:"content"`
	Usage   *usage  `json:"usage"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type block struct {
	Type      string     `json:"type"`
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Input     cappedJSON `json:"input"`
	ToolUseID string     `json:"tool_use_id"`
	IsError   bool       `json:"is_error"`
	Text      preview    `json:"text"`
	Thinking  preview    `json:"thinking"`
}

// promptContent decodes a user line whose message.content is a plain string.
type promptContent struct {
	Message struct {
		Content preview `json:"content"`
	} `json:"message"`
}

// previewBytes bounds how much of a text field is decoded and kept. The log shows less
// (maxLoggedBytes): redaction runs on the longer text first, so a secret that straddles the
// display cut is still recognised and masked whole.
const previewBytes = 2 * maxLoggedBytes

// preview keeps the length of a JSON string and its first previewBytes bytes, decoded. Its
// UnmarshalJSON never fails: a damaged field must not cost the rest of the record.
type preview struct {
	text    string
	rawSize int
	set     bool
}

func (p *preview) UnmarshalJSON(data []byte) error {
	p.set = true
	p.rawSize = len(data)
	if len(data) < 2 || data[0] != '"' {
		return nil
	}
	if len(data) <= previewBytes+2 {
		var s string
		if json.Unmarshal(data, &s) == nil {
			p.text = s
		}
		return nil
	}
	// Decode a prefix: close the string after previewBytes bytes, backing off up to the length of
	// the longest escape (\uXXXX) until the prefix is a valid JSON string.
	buf := make([]byte, 0, previewBytes+2)
	for cut := previewBytes + 1; cut > previewBytes+1-6 && cut > 1; cut-- {
		buf = append(append(buf[:0], data[:cut]...), '"')
		var s string
		if json.Unmarshal(buf, &s) == nil {
			p.text = s + "…"
			return nil
		}
	}
	return nil
}

// inputBytes bounds the tool_use input the wrapper keeps (to log it and, for
// report_internal_issue, to decode it); a larger input is noted by size only.
const inputBytes = 64 << 10

// cappedJSON is a copy of a JSON value of at most inputBytes bytes, else only its size.
type cappedJSON struct {
	raw  []byte
	size int
}

func (c *cappedJSON) UnmarshalJSON(data []byte) error {
	c.size = len(data)
	if len(data) <= inputBytes {
		c.raw = bytes.Clone(data)
	}
	return nil
}
