package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"tatara.dev/cli/pkg/redact"
)

// Event type labels. The set is closed so tatara_wrapper_stream_events_total has bounded
// cardinality: anything else is counted as other.
const (
	labelOther     = "other"
	labelMalformed = "malformed"
)

// blockLabels are content-block types, counted per block.
var blockLabels = map[string]string{
	"text": "text", "thinking": "thinking", "redacted_thinking": "redacted_thinking",
	"tool_use": "tool_use", "tool_result": "tool_result", "image": "image", "document": "document",
}

// recordLabels are line types, counted per line when the line carries no content blocks. The
// second group is the bookkeeping Claude Code 2.1 writes between turns (the request it sent, its
// shape and blobs, tool and cost state); a real transcript of it is testdata/claude-2.1.328.jsonl.
var recordLabels = map[string]string{
	"user": "user", "assistant": "assistant", "system": "system", "summary": "summary",
	"queue-operation": "queue-operation", "attachment": "attachment", "progress": "progress",
	"file-history-snapshot": "file-history-snapshot",

	"api-request": "api-request", "api-request-blob": "api-request-blob", "api-request-shape": "api-request-shape",
	"atis-latch": "atis-latch", "tools-used": "tools-used", "last-prompt": "last-prompt", "cost-state": "cost-state",
}

// StreamEventLabels lists every value of tatara_wrapper_stream_events_total's type label.
func StreamEventLabels() []string {
	seen := map[string]bool{labelOther: true, labelMalformed: true}
	for _, m := range []map[string]string{blockLabels, recordLabels} {
		for _, l := range m {
			seen[l] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func clampBlockType(s string) string {
	if l, ok := blockLabels[s]; ok {
		return l
	}
	return labelOther
}

func clampRecordType(s string) string {
	if l, ok := recordLabels[s]; ok {
		return l
	}
	return labelOther
}

// maxResync bounds recovery attempts on one damaged line, so hostile input costs linear time.
const maxResync = 16

// maxLoggedBytes bounds any transcript-derived string in a log line: the one cap of every log
// field of the cli and the wrapper.
const maxLoggedBytes = redact.MaxAttrBytes

func indexNewline(b []byte) int { return bytes.IndexByte(b, '\n') }

// processLine handles one complete line (its '\n' excluded). total is the line's length in the
// file; when it exceeds len(line), line is only the head of an oversize line.
func (t *Tailer) processLine(src source, line []byte, total int64) {
	t.mu.Lock()
	t.sum.Lines++
	t.mu.Unlock()
	if total > int64(len(line)) {
		t.processOversize(src, line, total)
		return
	}
	// NUL runs (a crashed writer's preallocated blocks) separate what is left of records.
	for len(line) > 0 {
		var seg []byte
		if i := bytes.IndexByte(line, 0); i >= 0 {
			seg, line = line[:i], line[i+1:]
		} else {
			seg, line = line, nil
		}
		if seg = bytes.TrimSpace(seg); len(seg) > 0 {
			t.processSegment(src, seg)
		}
	}
}

// processSegment handles NUL-free, trimmed bytes: normally one record, possibly several glued
// together or a damaged one followed by good ones.
func (t *Tailer) processSegment(src source, seg []byte) {
	rec, err := parseRecord(seg)
	if err == nil {
		t.handleRecord(src, &rec)
		return
	}
	start := 0
	for attempt := 0; start < len(seg); {
		s := seg[start:]
		dec := json.NewDecoder(bytes.NewReader(s))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			rec, perr := parseRecord(raw)
			if perr == nil && (attempt == 0 || looksLikeRecord(&rec)) {
				t.handleRecord(src, &rec)
			} else {
				if perr == nil {
					perr = errors.New("recovered value is not a transcript record")
				}
				t.malformed(src, raw, perr)
			}
			start += int(dec.InputOffset())
			for start < len(seg) && isSpace(seg[start]) {
				start++
			}
			continue
		}
		attempt++
		off := len(s)
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset > 0 && se.Offset < int64(len(s)) {
			off = int(se.Offset)
		}
		t.malformed(src, s[:off], err)
		if attempt >= maxResync || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			// Cut short, nothing glued after it: no record left to find.
			return
		}
		next := resyncPoint(s, off)
		if next <= 0 {
			return
		}
		start += next
	}
}

// resyncPoint returns where the next record probably starts in s, whose decode failed at off:
// the last `{"` up to and including the failing byte (a record glued into the damaged one), else
// the first `{"` after it; 0 if none.
func resyncPoint(s []byte, off int) int {
	end := min(off+1, len(s))
	if j := bytes.LastIndex(s[1:end], []byte(`{"`)); j >= 0 {
		return j + 1
	}
	if j := bytes.Index(s[end:], []byte(`{"`)); j >= 0 {
		return end + j
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// looksLikeRecord guards the recovery path against a complete inner object (a content block)
// of a damaged record being taken for a record of its own.
func looksLikeRecord(r *record) bool {
	if r.Type == "" {
		return false
	}
	_, known := recordLabels[r.Type]
	return known || r.UUID != "" || r.SessionID != ""
}

// errNotObject is returned for a line that is valid JSON but not an object.
var errNotObject = errors.New("line is not a JSON object")

// parseRecord decodes one JSON object. Type mismatches in fields (schema drift) are tolerated:
// the record keeps what did decode. A string message.content (a user prompt) is decoded again
// on its own, which only prompt lines pay for.
func parseRecord(data []byte) (record, error) {
	var r record
	if len(data) == 0 || data[0] != '{' {
		return r, errNotObject
	}
	err := json.Unmarshal(data, &r)
	if err == nil {
		return r, nil
	}
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return r, err
	}
	if ute.Field == "message.content" {
		var p promptContent
		if json.Unmarshal(data, &p) == nil || p.Message.Content.set {
			r.prompt = p.Message.Content
		}
	}
	return r, nil
}

// handleRecord turns one record into events.
func (t *Tailer) handleRecord(src source, r *record) {
	if r.UUID != "" {
		// Resumed sessions repeat lines; a uuid names one line.
		if !t.seenUUID.firstTime(r.UUID) {
			t.log.Debug("duplicate transcript line skipped", slog.String("uuid", t.clean(r.UUID)))
			return
		}
	}
	switch r.Type {
	case "user", "assistant":
		if r.Type == "assistant" && r.Message.ID != "" {
			t.messageUsage(r.Message.ID, r.Message.Usage)
		}
		switch {
		case r.prompt.set:
			t.event(src, r, "text", slog.Int("chars", r.prompt.rawSize),
				slog.String("text", t.clean(r.prompt.text)))
		case len(r.Message.Content) == 0:
			t.event(src, r, r.Type)
		default:
			for i := range r.Message.Content {
				t.handleBlock(src, r, &r.Message.Content[i])
			}
		}
	default:
		label := clampRecordType(r.Type)
		if label == labelOther {
			t.event(src, r, label, slog.String("raw_type", t.clean(r.Type)))
			return
		}
		t.event(src, r, label, slog.String("subtype", t.clean(r.Subtype)))
	}
}

// messageUsage counts a turn for a message id not seen before and keeps the totals at the sum of
// the last usage seen per message.
func (t *Tailer) messageUsage(id string, u *usage) {
	h := hashKey(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.usage.get(h)
	if !seen {
		t.sum.Turns++
	}
	if u == nil {
		if !seen {
			t.usage.put(h, usage{})
		}
		return
	}
	t.sum.InputTokens += u.InputTokens - old.InputTokens
	t.sum.OutputTokens += u.OutputTokens - old.OutputTokens
	t.sum.CacheTokens += u.CacheReadInputTokens - old.CacheReadInputTokens
	t.usage.put(h, *u)
}

func (t *Tailer) handleBlock(src source, r *record, b *block) {
	switch b.Type {
	case "tool_use":
		if b.ID != "" {
			if !t.seenTool.firstTime(b.ID) {
				t.log.Debug("duplicate tool_use skipped", slog.String("tool_use_id", t.clean(b.ID)))
				return
			}
		}
		t.mu.Lock()
		t.sum.ToolUses++
		t.mu.Unlock()
		// Redact once: the same bytes feed the log line and the internal-issue decode.
		input := b.Input.raw
		if input != nil {
			input = t.red.Bytes(input)
		}
		t.event(src, r, "tool_use", slog.String("tool", t.clean(b.Name)),
			slog.String("tool_use_id", t.clean(b.ID)), slog.Int("input_bytes", b.Input.size),
			slog.String("input", cut(string(input))))
		if b.Name == internalIssueToolName {
			var tooBig error
			if input == nil {
				tooBig = errors.New("tool input of " + strconv.Itoa(b.Input.size) + " bytes was not kept (limit " + strconv.Itoa(inputBytes) + ")")
			}
			t.emitInternalIssue(r.Message.ID, b.ID, input, tooBig)
		}
	case "tool_result":
		if b.IsError {
			t.mu.Lock()
			t.sum.ToolErrors++
			t.mu.Unlock()
		}
		t.event(src, r, "tool_result", slog.String("tool_use_id", t.clean(b.ToolUseID)),
			slog.Bool("is_error", b.IsError))
	case "text":
		t.event(src, r, "text", slog.Int("chars", b.Text.rawSize), slog.String("text", t.clean(b.Text.text)))
	case "thinking":
		// Reasoning is not logged, only its size.
		t.event(src, r, "thinking", slog.Int("chars", b.Thinking.rawSize))
	default:
		label := clampBlockType(b.Type)
		if label == labelOther {
			t.event(src, r, label, slog.String("block_type", t.clean(b.Type)))
			return
		}
		t.event(src, r, label)
	}
}

// event logs one agent_stream INFO line and counts it.
func (t *Tailer) event(src source, r *record, label string, extra ...slog.Attr) {
	t.count(label)
	attrs := make([]slog.Attr, 0, 8+len(extra))
	attrs = append(attrs, slog.String("type", label), slog.String("record_type", t.clean(r.Type)),
		slog.String("uuid", t.clean(r.UUID)), slog.String("source", src.kind))
	if r.Message.ID != "" {
		attrs = append(attrs, slog.String("message_id", t.clean(r.Message.ID)))
	}
	if src.agentID != "" {
		attrs = append(attrs, slog.String("agent_id", src.agentID))
	}
	attrs = append(attrs, extra...)
	t.log.LogAttrs(context.Background(), slog.LevelInfo, "agent_stream", attrs...)
}

// malformed logs and counts bytes that are not a record.
func (t *Tailer) malformed(src source, data []byte, err error) {
	t.count(labelMalformed)
	t.mu.Lock()
	t.sum.Malformed++
	t.mu.Unlock()
	t.log.LogAttrs(context.Background(), slog.LevelWarn, "agent_stream",
		slog.String("type", labelMalformed), slog.String("source", src.kind),
		slog.String("path", src.path), slog.Int("bytes", len(data)),
		slog.String("parse_error", t.clean(err.Error())), slog.String("head", t.clean(string(data))))
}

func (t *Tailer) count(label string) {
	t.mu.Lock()
	t.sum.Events++
	t.mu.Unlock()
	if t.streamCounter == nil {
		return
	}
	c, ok := t.counters[label]
	if !ok {
		c = t.streamCounter.WithLabelValues(label)
		t.counters[label] = c
	}
	c.Inc()
}

// clean redacts and bounds a transcript-derived string for logging. Redaction runs on up to
// four times the logged length, before the cut, so a secret across the cut is masked whole.
func (t *Tailer) clean(s string) string {
	if len(s) > 4*maxLoggedBytes {
		s = s[:4*maxLoggedBytes]
	}
	return cut(t.red.String(s))
}

func cut(s string) string {
	if len(s) <= maxLoggedBytes {
		return s
	}
	return s[:maxLoggedBytes] + "…"
}

// processOversize handles a line longer than maxLine from its head: the fields the wrapper needs
// precede the bulky ones in real records (type, uuid, message.id, the block's type/id/name come
// before text, input and content), so a token walk over the head recovers them; the event is
// counted either way.
func (t *Tailer) processOversize(src source, head []byte, total int64) {
	t.mu.Lock()
	t.sum.Oversize++
	t.mu.Unlock()
	h := walkHead(head)
	r := &record{Type: h.typ, UUID: h.uuid, Subtype: h.subtype, Message: message{ID: h.messageID}}
	if r.UUID != "" {
		if !t.seenUUID.firstTime(r.UUID) {
			return
		}
	}
	attrs := []slog.Attr{slog.Bool("truncated", true), slog.Int64("line_bytes", total)}
	if h.typ == "" {
		t.malformed(src, head, errors.New("line of "+strconv.FormatInt(total, 10)+" bytes exceeds the limit and its head names no type"))
		return
	}
	if h.blockType == "" {
		t.event(src, r, clampRecordType(h.typ), attrs...)
		return
	}
	switch h.blockType {
	case "tool_use":
		if h.blockID != "" {
			if !t.seenTool.firstTime(h.blockID) {
				return
			}
		}
		t.mu.Lock()
		t.sum.ToolUses++
		t.mu.Unlock()
		t.event(src, r, "tool_use", append(attrs, slog.String("tool", t.clean(h.blockName)),
			slog.String("tool_use_id", t.clean(h.blockID)))...)
		if h.blockName == internalIssueToolName {
			t.emitInternalIssue(h.messageID, h.blockID, nil,
				errors.New("line of "+strconv.FormatInt(total, 10)+" bytes exceeds the limit; input not decoded"))
		}
	case "tool_result":
		t.event(src, r, "tool_result", append(attrs, slog.String("tool_use_id", t.clean(h.toolUseID)))...)
	default:
		t.event(src, r, clampBlockType(h.blockType), attrs...)
	}
}
