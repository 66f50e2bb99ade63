package agentstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// serverConfig is one entry of the agent CLI's mcpServers map.
type serverConfig struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Command string            `json:"command"`
	Headers map[string]string `json:"headers"`
}

// loadMCPConfig merges every --mcp-config value, each a file path or inline JSON.
func loadMCPConfig(values []string) (map[string]serverConfig, error) {
	servers := map[string]serverConfig{}
	for _, v := range values {
		data := []byte(v)
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			var err error
			if data, err = os.ReadFile(v); err != nil {
				return nil, fmt.Errorf("failed to read MCP config %q: %w", v, err)
			}
		}
		var cfg struct {
			MCPServers map[string]serverConfig `json:"mcpServers"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("failed to parse MCP config %q: %w", v, err)
		}
		if cfg.MCPServers == nil {
			return nil, fmt.Errorf("failed to parse MCP config %q: no mcpServers object", v)
		}
		for name, s := range cfg.MCPServers {
			s.URL = expandVars(s.URL)
			for k, h := range s.Headers {
				s.Headers[k] = expandVars(h)
			}
			servers[name] = s
		}
	}
	return servers, nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandVars expands ${VAR} like the agent CLI does in url and headers.
func expandVars(s string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string { return os.Getenv(m[2 : len(m)-1]) })
}

var nonToolChar = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// toolPrefix is the agent CLI's name prefix for a server's tools.
func toolPrefix(server string) string {
	return "mcp__" + nonToolChar.ReplaceAllString(server, "_") + "__"
}

// mcpServer is a configured server and, once connected, its client.
type mcpServer struct {
	name   string
	cfg    serverConfig
	client *client.Client
	err    error
}

const connectTimeout = 10 * time.Second

// connect initializes the streamable HTTP session; the error is kept for the init status.
func (s *mcpServer) connect(ctx context.Context) {
	if s.cfg.Type != "http" && (s.cfg.Type != "" || s.cfg.URL == "") {
		s.err = fmt.Errorf("server %q: transport %q is not supported by the stand-in (only http)", s.name, s.cfg.Type)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := client.NewStreamableHttpClient(s.cfg.URL, transport.WithHTTPHeaders(s.cfg.Headers))
	if err != nil {
		s.err = fmt.Errorf("failed to create MCP client for %q: %w", s.cfg.URL, err)
		return
	}
	if err := c.Start(ctx); err != nil {
		s.err = fmt.Errorf("failed to start MCP client for %q: %w", s.cfg.URL, err)
		return
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "agent-standin", Version: Version}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		s.err = fmt.Errorf("failed to initialize MCP session with %q: %w", s.cfg.URL, err)
		return
	}
	s.client = c
}

func (s *mcpServer) status() string {
	if s.client != nil {
		return "connected"
	}
	return "failed"
}

// listTools returns the server's tool names in list order.
func (s *mcpServer) listTools(ctx context.Context) ([]string, error) {
	if s.client == nil {
		return nil, fmt.Errorf("failed to list tools of MCP server %q: not connected: %w", s.name, s.err)
	}
	res, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("failed to list tools of MCP server %q: %w", s.name, err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// callTool calls tool with args; a tool error comes back as text with isError set.
func (s *mcpServer) callTool(ctx context.Context, tool string, args json.RawMessage) (string, bool, error) {
	if s.client == nil {
		return "", false, fmt.Errorf("failed to call tool %q: MCP server %q not connected: %w", tool, s.name, s.err)
	}
	var argMap map[string]any
	if err := json.Unmarshal(args, &argMap); err != nil {
		return "", false, fmt.Errorf("failed to decode arguments of tool %q: %w", tool, err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = argMap
	res, err := s.client.CallTool(ctx, req)
	if err != nil {
		return "", false, fmt.Errorf("failed to call tool %q on MCP server %q: %w", tool, s.name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// resolve maps a script's tool reference to a server and a bare tool name.
func resolve(servers map[string]*mcpServer, ref string) (*mcpServer, string, error) {
	if strings.HasPrefix(ref, "mcp__") {
		for _, s := range servers {
			if p := toolPrefix(s.name); strings.HasPrefix(ref, p) {
				return s, strings.TrimPrefix(ref, p), nil
			}
		}
		return nil, "", fmt.Errorf("failed to resolve tool %q: no configured MCP server has that prefix", ref)
	}
	if s, ok := servers["tatara"]; ok {
		return s, ref, nil
	}
	if len(servers) == 1 {
		for _, s := range servers {
			return s, ref, nil
		}
	}
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, "", fmt.Errorf("failed to resolve tool %q: name the server (mcp__<server>__<tool>); configured: %v", ref, names)
}
