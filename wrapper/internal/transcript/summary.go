package transcript

// Summary is what the tailer saw, for the wrapper's end-of-run report.
type Summary struct {
	Files          int   `json:"files"`
	Bytes          int64 `json:"bytes"`
	Lines          int64 `json:"lines"`
	Events         int64 `json:"events"`
	Malformed      int64 `json:"malformed"`
	Oversize       int64 `json:"oversize_lines"`
	Turns          int   `json:"turns"`
	ToolUses       int64 `json:"tool_uses"`
	ToolErrors     int64 `json:"tool_errors"`
	InternalIssues int64 `json:"internal_issues"`
	InputTokens    int64 `json:"input_tokens"`
	OutputTokens   int64 `json:"output_tokens"`
	CacheTokens    int64 `json:"cache_read_input_tokens"`
}

// Summary returns the totals so far. Token usage is taken once per assistant message id (every
// line of a message repeats it; the last one seen counts).
func (t *Tailer) Summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum
}
