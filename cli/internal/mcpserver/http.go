package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/sync/semaphore"

	"tatara.dev/cli/pkg/agentpod"
)

// DefaultMaxBodyBytes bounds one request body on the MCP endpoint: far above any real tool call
// (a 5 MB argument passes), far below what lets one request exhaust the cli's memory.
const DefaultMaxBodyBytes int64 = 8 << 20

// HTTPConfig is what NewHTTPHandler needs.
type HTTPConfig struct {
	// Server is the http.Server that serves the handler; Shutdown stops it once the MCP sessions
	// and their streams are closed. Nil when the caller stops its server itself.
	Server *http.Server
	// MaxBodyBytes bounds a request body; <= 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// LimitSetting names how MaxBodyBytes is set (e.g. "--max-body-bytes"), for the error a client
	// gets over the limit.
	LimitSetting string
	// MaxInFlightBytes bounds the request bodies held at once (each counted at its declared length,
	// or at MaxBodyBytes when undeclared); a request waits for room. <= 0 means twice MaxBodyBytes.
	MaxInFlightBytes int64
	// MaxSessions bounds the live MCP sessions; <= 0 means DefaultMaxSessions.
	MaxSessions int
}

// HTTPHandler serves the MCP streamable HTTP transport (MCP 2025-11-25) on a loopback listener
// next to an agent that may send anything. Before mcp-go sees a request it refuses a browser
// Origin other than the listener's own (403), a body over the limit (413), and a request whose
// session the server did not issue or has ended (404; 400 without one). It bounds what a flood
// costs: the bodies held at once (MaxInFlightBytes) and the live sessions (MaxSessions, least
// recently used ended first, with their state in mcp-go). mcp-go keeps the sessions
// (WithSessionIdManager) and checks the Host header.
type HTTPHandler struct {
	mcp          *server.StreamableHTTPServer
	sessions     *boundedSessions
	maxBody      int64
	limitSetting string
	inFlight     *semaphore.Weighted
}

// NewHTTPHandler returns the MCP endpoint of s.
func (s *Server) NewHTTPHandler(cfg HTTPConfig) *HTTPHandler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.LimitSetting == "" {
		cfg.LimitSetting = "the server's body limit"
	}
	if cfg.MaxInFlightBytes <= 0 {
		cfg.MaxInFlightBytes = 2 * cfg.MaxBodyBytes
	}
	// Random ids, remembered live and ended, within a bound (sessions.go). Ids are not signed:
	// one process serves one pod.
	sessions := newBoundedSessions(cfg.MaxSessions)
	opts := []server.StreamableHTTPOption{
		server.WithEndpointPath(agentpod.MCPPath),
		server.WithSessionIdManager(sessions),
		server.WithStreamableHTTPLogger(s.cfg.Logger),
	}
	if cfg.Server != nil {
		opts = append(opts, server.WithStreamableHTTPServer(cfg.Server))
	}
	return &HTTPHandler{
		mcp:          server.NewStreamableHTTPServer(s.MCP, opts...),
		sessions:     sessions,
		maxBody:      cfg.MaxBodyBytes,
		limitSetting: cfg.LimitSetting,
		inFlight:     semaphore.NewWeighted(max(cfg.MaxInFlightBytes, cfg.MaxBodyBytes)),
	}
}

// Shutdown ends every MCP session and closes its open GET (SSE) stream, then shuts down
// HTTPConfig.Server if one was given. Without the first step an open stream holds the server's
// graceful shutdown until its timeout.
func (h *HTTPHandler) Shutdown(ctx context.Context) error {
	return h.mcp.Shutdown(ctx)
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := checkOrigin(r); msg != "" {
		writeRPCError(w, http.StatusForbidden, mcp.INVALID_REQUEST, msg)
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		// The body's room is held until the call is answered: mcp-go decodes it, and the tool
		// holds its arguments, meanwhile.
		room := h.maxBody
		if r.ContentLength >= 0 && r.ContentLength < room {
			room = r.ContentLength
		}
		if err := h.inFlight.Acquire(r.Context(), room); err != nil {
			return // the client has gone
		}
		defer h.inFlight.Release(room)
		var ok bool
		if body, ok = h.readBody(w, r); !ok {
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if status, msg := h.checkSession(r, body); status != 0 {
		writeRPCError(w, status, mcp.INVALID_REQUEST, msg)
		return
	}
	h.mcp.ServeHTTP(w, r)
	h.dropEvicted(r)
}

// dropEvicted ends, in mcp-go too, the sessions the bound evicted (an initialize past
// MaxSessions): mcp-go drops a session's state on its DELETE.
func (h *HTTPHandler) dropEvicted(r *http.Request) {
	for _, id := range h.sessions.TakeEvicted() {
		del, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodDelete, r.URL.String(), nil)
		if err != nil {
			continue // r's URL parsed once already
		}
		del.Host = r.Host
		del.Header.Set(server.HeaderKeySessionID, id)
		h.mcp.ServeHTTP(discardResponse{header: http.Header{}}, del)
	}
}

// discardResponse is the ResponseWriter of an internal request whose answer nobody reads.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}

// readBody reads a POST body of at most h.maxBody bytes; over that it answers 413 and reads no
// further, so a huge body costs the limit at most.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	tooLarge := func() ([]byte, bool) {
		writeRPCError(w, http.StatusRequestEntityTooLarge, mcp.INVALID_REQUEST,
			fmt.Sprintf("request body is larger than the limit of %d bytes (%s)", h.maxBody, h.limitSetting))
		return nil, false
	}
	if r.ContentLength > h.maxBody {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if _, over := errors.AsType[*http.MaxBytesError](err); over {
			return tooLarge()
		}
		writeRPCError(w, http.StatusBadRequest, mcp.PARSE_ERROR, "failed to read the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// checkOrigin returns why r's Origin is refused, or "". No Origin header: not a browser, allowed
// (the agent's own client). Otherwise only a page served from this very listener may call
// (http://<listener host>:<port>, or localhost on that port): any other site, another local
// port, and "null" (sandboxed frames, file: pages) are refused, as MCP 2025-11-25 requires.
func checkOrigin(r *http.Request) string {
	values, present := r.Header["Origin"]
	if !present {
		return ""
	}
	refuse := func(origin string) string {
		return fmt.Sprintf("Origin %q is not allowed: this MCP server accepts requests without an Origin header "+
			"or from its own origin (http://<its listen address>) only", origin)
	}
	if len(values) != 1 {
		return refuse(strings.Join(values, ", "))
	}
	origin := values[0]
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return refuse(origin)
	}
	localHost, localPort, err := net.SplitHostPort(local.String())
	if err != nil {
		return refuse(origin)
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.Port() != localPort {
		return refuse(origin)
	}
	host := u.Hostname()
	if host == localHost || (strings.EqualFold(host, "localhost") && isLoopback(localHost)) {
		return ""
	}
	return refuse(origin)
}

// sessionless is true for a protocol revision without sessions (2026-07-28 and later) that this
// SDK knows. mcp-go compares versions as strings, so an unknown value such as "9" would otherwise
// pass for a newer revision and skip the session check.
func sessionless(version string) bool {
	return mcp.IsValidProtocolVersion(version) && mcp.IsModernProtocol(version)
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSession refuses a request that needs a session and has none (400), or names one this
// server did not issue or has ended (404). initialize opens a session and needs none; a client
// on the sessionless revision (2026-07-28 and later) is left to mcp-go, which ignores the header
// there; a POST that is no JSON-RPC request is left to mcp-go's parse errors.
func (h *HTTPHandler) checkSession(r *http.Request, body []byte) (int, string) {
	if sessionless(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return 0, ""
	}
	switch r.Method {
	case http.MethodGet, http.MethodDelete:
	case http.MethodPost:
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method == "" || msg.Method == string(mcp.MethodInitialize) {
			return 0, ""
		}
		if v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string); sessionless(v) {
			return 0, ""
		}
	default:
		return 0, ""
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		return http.StatusBadRequest, "the " + server.HeaderKeySessionID + " header is required: send initialize first and use the session id it returns"
	}
	if ended, err := h.sessions.Validate(id); err != nil || ended {
		return http.StatusNotFound, fmt.Sprintf("session %q is unknown or has ended: send initialize to start a new one", id)
	}
	return 0, ""
}

// writeRPCError answers with a JSON-RPC error and the HTTP status the transport prescribes.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
		Error: mcp.JSONRPCErrorDetails{Code: code, Message: msg}})
}
