package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tiktoken-go/tokenizer"
)

// Limits of the stand-in; a request over one is refused with an error that names it.
const (
	// MaxRequestBytes bounds one request body; the agent CLI's requests carry the whole
	// conversation, tool results included.
	MaxRequestBytes = 32 << 20
	// MaxRecords bounds the requests kept in memory; later ones are counted as dropped.
	MaxRecords = 20000
)

// Record is what one request gave the model and what the stand-in answered.
type Record struct {
	Seq      int    `json:"seq"`
	Script   string `json:"script"`
	Endpoint string `json:"endpoint"` // "messages" or "count_tokens"
	Stream   bool   `json:"stream"`
	Model    string `json:"model"`
	// Tools are the tools whose schema the request sent; DeferredTools are only named, to be
	// loaded with the tool-search tool.
	Tools         []string `json:"tools"`
	DeferredTools []string `json:"deferred_tools"`
	// InputTokens counts what the model reads (system, messages, tool schemas sent) with the
	// o200k_base BPE; TataraSchemaTokens is the part that is tatara tool schemas.
	InputTokens        int `json:"input_tokens"`
	TataraSchemaTokens int `json:"tatara_schema_tokens"`
	// Answer is what the stand-in replied: "tool_use <name>", "text" or "error".
	Answer     string   `json:"answer"`
	Step       int      `json:"step"`
	ToolErrors []string `json:"tool_errors,omitempty"`
	// ToolResults are the results of the agent's tool calls this request brought (the previous
	// step's), as "<tool>: <text>", each cut to 2 KiB.
	ToolResults []string `json:"tool_results,omitempty"`
	Error       string   `json:"error,omitempty"`
	// Sent is the usage the answer reported, as the model API would: a later step of a
	// conversation reads half of its input from the prompt cache, as the agent CLI's cached
	// system prompt and tools do. Zero for count_tokens.
	Sent SentUsage `json:"sent"`
}

// SentUsage is the usage a messages answer reported; its sum is what a model gateway must meter.
type SentUsage struct {
	InputTokens          int `json:"input_tokens"`
	OutputTokens         int `json:"output_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
}

// Tokens is the sum of the counts.
func (u SentUsage) Tokens() int { return u.InputTokens + u.OutputTokens + u.CacheReadInputTokens }

// Records is the answer of GET /recorded.
type Records struct {
	Records []Record `json:"records"`
	Dropped int64    `json:"dropped"`
}

// Server is the Messages API stand-in.
type Server struct {
	apiKey string
	log    *slog.Logger
	codec  tokenizer.Codec

	seq     atomic.Int64
	dropped atomic.Int64
	mu      sync.Mutex
	records []Record
}

// NewServer returns a server that requires apiKey in x-api-key (or a bearer token) when it is
// not empty.
func NewServer(apiKey string, log *slog.Logger) (*Server, error) {
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("failed to load the o200k_base tokenizer: %w", err)
	}
	return &Server{apiKey: apiKey, log: log, codec: codec}, nil
}

// Handler serves the Messages API routes the agent CLI calls, /recorded and /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.authorized(s.messages))
	mux.HandleFunc("POST /v1/messages/count_tokens", s.authorized(s.countTokens))
	mux.HandleFunc("GET /recorded", s.recorded)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// The CLI checks that its base URL answers before the first request.
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			apiError(w, http.StatusMethodNotAllowed, "invalid_request_error", r.Method+" / is not served")
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("%s %s is not served by the model stand-in", r.Method, r.URL.Path))
	})
	return mux
}

func (s *Server) authorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.apiKey != "" {
			got := r.Header.Get("x-api-key")
			if got == "" {
				got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}
			if got != s.apiKey {
				apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
				return
			}
		}
		next(w, r)
	}
}

func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (*request, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			apiError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is over the %d-byte limit", MaxRequestBytes))
			return nil, false
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "failed to read request body: "+err.Error())
		return nil, false
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "request body is not a Messages API request: "+err.Error())
		return nil, false
	}
	if len(req.Messages) == 0 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "messages: at least one message is required")
		return nil, false
	}
	return &req, true
}

func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	rec := s.newRecord("count_tokens", req)
	script, _, _ := findScript(req.Messages)
	rec.Script = script.ID
	s.keep(rec)
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": rec.InputTokens})
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	rec := s.newRecord("messages", req)
	ans := s.answer(req, &rec)
	rec.Sent = SentUsage{InputTokens: rec.InputTokens, OutputTokens: s.count(ans.outputText())}
	if rec.Step > 1 {
		rec.Sent.CacheReadInputTokens = rec.InputTokens / 2
		rec.Sent.InputTokens -= rec.Sent.CacheReadInputTokens
	}
	s.keep(rec)
	s.log.Info("answered", slog.String("script", rec.Script), slog.Int("seq", rec.Seq), slog.Int("step", rec.Step),
		slog.String("answer", rec.Answer), slog.Int("tools", len(rec.Tools)), slog.Int("deferred_tools", len(rec.DeferredTools)),
		slog.Int("input_tokens", rec.InputTokens), slog.String("error", rec.Error))
	msg := ans.message(fmt.Sprintf("msg_standin_%06d", rec.Seq), req.Model, rec.Sent)
	if req.Stream {
		streamMessage(w, msg)
		return
	}
	writeJSON(w, http.StatusOK, msg)
}

func (s *Server) newRecord(endpoint string, req *request) Record {
	rec := Record{Seq: int(s.seq.Add(1)), Endpoint: endpoint, Stream: req.Stream, Model: req.Model}
	off, err := readOffered(req)
	if err != nil {
		rec.Error = "failed to read tools: " + err.Error()
	}
	rec.Tools, rec.DeferredTools = off.loaded, off.deferred
	rec.InputTokens = s.inputTokens(req, off)
	for _, name := range schemasSeen(req, off) {
		if strings.HasPrefix(name, MCPToolPrefix) {
			rec.TataraSchemaTokens += s.count(string(off.schemas[name]))
		}
	}
	return rec
}

// answer decides the reply: the script's next step, a tool-search call that loads its tool, or a
// text that says why the script cannot go on.
func (s *Server) answer(req *request, rec *Record) reply {
	script, found, err := findScript(req.Messages)
	if !found {
		rec.Answer = "text"
		return reply{text: "There is no tatara-model-script in this conversation; nothing to do."}
	}
	rec.Script = script.ID
	if err != nil {
		rec.Answer, rec.Error = "error", "script: "+err.Error()
		return reply{text: "Script error: " + err.Error()}
	}
	p := readProgress(req.Messages)
	rec.Step, rec.ToolErrors, rec.ToolResults = p.calls, p.toolErrors, p.newResults
	if p.calls >= len(script.Steps) {
		rec.Answer = "text"
		return reply{text: "Script " + script.ID + " complete."}
	}
	step := script.Steps[p.calls]
	if step.Tool == "" {
		rec.Answer = "text"
		return reply{text: step.Text}
	}
	off, _ := readOffered(req)
	switch {
	case contains(off.loaded, step.Tool) || p.searched[step.Tool]:
		rec.Answer = "tool_use " + step.Tool
		return reply{tool: step.Tool, input: step.Input}
	case contains(off.deferred, step.Tool) && contains(off.loaded, toolSearchTool):
		rec.Answer = "tool_use " + toolSearchTool
		in, _ := json.Marshal(map[string]any{"query": "select:" + step.Tool, "max_results": 1})
		return reply{tool: toolSearchTool, input: in}
	default:
		rec.Answer, rec.Error = "error", fmt.Sprintf("step %d: tool %s was not offered to the model", p.calls+1, step.Tool)
		return reply{text: "Script error: " + rec.Error}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func (s *Server) keep(rec Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) >= MaxRecords {
		s.dropped.Add(1)
		return
	}
	s.records = append(s.records, rec)
}

// recorded serves the records, of one script with ?script=<id>.
func (s *Server) recorded(w http.ResponseWriter, r *http.Request) {
	id, filter := r.URL.Query()["script"]
	out := Records{Records: []Record{}, Dropped: s.dropped.Load()}
	s.mu.Lock()
	for _, rec := range s.records {
		if !filter || rec.Script == id[0] {
			out.Records = append(out.Records, rec)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) count(text string) int {
	if text == "" {
		return 0
	}
	n, err := s.codec.Count(text)
	if err != nil {
		// Invalid UTF-8: count bytes, an upper bound, rather than lose the text.
		return len(text)
	}
	return n
}

// inputTokens counts what the model reads: system text, every message block (text, tool calls
// and results) and the schemas sent. Deferred tools cost only their names in the system text.
func (s *Server) inputTokens(req *request, off offered) int {
	var b strings.Builder
	for _, blk := range req.System.Blocks {
		b.WriteString(blk.Text)
		b.WriteByte('\n')
	}
	for _, m := range req.Messages {
		for _, blk := range m.Content.Blocks {
			switch blk.Type {
			case "text":
				b.WriteString(blk.Text)
			case "tool_use":
				b.WriteString(blk.Name)
				b.Write(blk.Input)
			case "tool_result":
				text, _ := resultParts(blk.Content)
				b.WriteString(text)
			default:
				raw, _ := json.Marshal(blk)
				b.Write(raw)
			}
			b.WriteByte('\n')
		}
	}
	for _, name := range schemasSeen(req, off) {
		b.Write(off.schemas[name])
		b.WriteByte('\n')
	}
	return s.count(b.String())
}

// schemasSeen are the tools whose schema the model reads in this request: those sent loaded,
// and deferred ones that a tool-search result in the conversation references.
func schemasSeen(req *request, off offered) []string {
	names := append([]string(nil), off.loaded...)
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, m := range req.Messages {
		for _, blk := range m.Content.Blocks {
			if blk.Type != "tool_result" {
				continue
			}
			_, refs := resultParts(blk.Content)
			for _, n := range refs {
				if _, ok := off.schemas[n]; ok && !seen[n] {
					seen[n] = true
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// reply is one answer: a tool call or a final text.
type reply struct {
	tool  string
	input json.RawMessage
	text  string
}

func (a reply) outputText() string {
	if a.tool != "" {
		return a.tool + string(a.input)
	}
	return a.text
}

type apiMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []apiBlock     `json:"content"`
	StopReason   string         `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        map[string]int `json:"usage"`
}

type apiBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func (a reply) message(id, model string, u SentUsage) apiMessage {
	m := apiMessage{ID: id, Type: "message", Role: "assistant", Model: model,
		Usage: map[string]int{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": u.CacheReadInputTokens}}
	if a.tool != "" {
		m.Content = []apiBlock{{Type: "tool_use", ID: "toolu_" + strings.TrimPrefix(id, "msg_"), Name: a.tool, Input: a.input}}
		m.StopReason = "tool_use"
		return m
	}
	text := a.text
	m.Content = []apiBlock{{Type: "text", Text: &text}}
	m.StopReason = "end_turn"
	return m
}

// streamMessage writes msg as the Messages API's server-sent events.
func streamMessage(w http.ResponseWriter, msg apiMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		raw, _ := json.Marshal(data)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := msg
	start.Content, start.StopReason = []apiBlock{}, ""
	// As the model API does: message_start has the input counts and a first output count, the
	// final message_delta the output count of the whole message (cumulative, not an increment).
	start.Usage = map[string]int{"input_tokens": msg.Usage["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": msg.Usage["cache_read_input_tokens"]}
	event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range msg.Content {
		switch b.Type {
		case "tool_use":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)}})
		default:
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": *b.Text}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": msg.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": msg.Usage["output_tokens"]}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// ReadHeaderTimeout and the other server timeouts of cmd/model-standin.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = time.Minute
	WriteTimeout      = time.Minute
	IdleTimeout       = 2 * time.Minute
)
