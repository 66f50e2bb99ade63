// Package mcpserver turns the tool catalog into an MCP server: it filters the catalog by the
// tool profile, registers one generic handler per tool and counts what happens.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/obs"
	"tatara.dev/cli/pkg/internalissue"
)

// ServerName is how the agent CLI namespaces our tools (mcp__tatara__<tool>); the wrapper
// matches that prefix, so it must not change.
const ServerName = "tatara"

// FailOpenProfile is the gauge label when the profile is empty or unknown.
const FailOpenProfile = "all"

// DefaultCallTimeout bounds one backend call.
const DefaultCallTimeout = 30 * time.Second

// Config is what New needs.
type Config struct {
	// Profile is the requested tool profile (TATARA_TOOL_PROFILE or --tool-profile).
	Profile string
	// Backends by target; a target without a client makes its tools answer with an error
	// that names the missing setting.
	Backends map[catalog.Target]*backend.Client
	// Context supplies defaults (project, task) and log context.
	Context     map[string]string
	CallTimeout time.Duration
	Version     string
	Logger      *slog.Logger
	Metrics     *obs.Metrics
	// ClaimedAt is when a Task claimed this warm pool pod (zero otherwise): the first MCP request
	// observes the time since in tatara_mcp_claim_to_first_request_seconds.
	ClaimedAt time.Time
	// RecordIssue, when set, hands each valid report_internal_issue report to the operator's
	// record (issuerecord.Forwarder.Send); it must not block.
	RecordIssue func(internalissue.Report)
}

// Server is a configured MCP server.
type Server struct {
	MCP *server.MCPServer
	// ResolvedProfile is the profile name, or FailOpenProfile.
	ResolvedProfile string
	// Tools are the registered catalog entries, in catalog order.
	Tools []catalog.Tool

	cfg Config
	// firstRequest and firstCall log the agent's first MCP request and first tool call, once.
	firstRequest, firstCall sync.Once
}

// ResolveProfile returns the tool set of a known profile, or nil (every tool) with a WARN
// for "" and unknown names: a typo must never leave an agent without tools.
func ResolveProfile(profile string, log *slog.Logger) map[string]bool {
	allow, ok := catalog.ProfileTools(profile)
	if ok {
		return allow
	}
	if profile == "" {
		log.Warn("no tool profile set; serving every tool (fail-open)", "profile", profile, "known_profiles", catalog.ProfileNames())
	} else {
		log.Warn("unknown tool profile; serving every tool (fail-open)", "profile", profile, "known_profiles", catalog.ProfileNames())
	}
	return nil
}

// Select returns the catalog entries a profile registers, in catalog order, and the
// resolved profile label.
func Select(profile string, log *slog.Logger) ([]catalog.Tool, string) {
	allow := ResolveProfile(profile, log)
	label := profile
	if allow == nil {
		label = FailOpenProfile
	}
	var tools []catalog.Tool
	for _, t := range catalog.All() {
		if allow == nil || allow[t.Name] {
			tools = append(tools, t)
		}
	}
	return tools, label
}

// New builds the MCP server for cfg.Profile.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	tools, label := Select(cfg.Profile, cfg.Logger)
	s := &Server{ResolvedProfile: label, Tools: tools, cfg: cfg}
	s.MCP = server.NewMCPServer(ServerName, cfg.Version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithHooks(s.firstRequestHooks()),
		server.WithInstructions("Tatara platform tools for this task: memory, code graph, task and project operations. "+
			"Use report_internal_issue when the platform itself misbehaves."))
	for _, t := range tools {
		s.MCP.AddTool(ToMCPTool(t), s.handler(t))
	}
	if cfg.Metrics != nil {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		cfg.Metrics.ToolsRegistered(label, names)
	}
	return s
}

// firstRequestHooks log the first MCP request this process serves, once: when the agent reached
// its tools (the e2e suite's startup phases read it; so can an SRE looking at a slow start).
func (s *Server) firstRequestHooks() *server.Hooks {
	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(func(context.Context, any, any) error {
		s.firstRequest.Do(func() {
			s.cfg.Logger.Info("first mcp request")
			if !s.cfg.ClaimedAt.IsZero() && s.cfg.Metrics != nil {
				s.cfg.Metrics.ClaimToFirstRequest.Observe(max(time.Since(s.cfg.ClaimedAt), 0).Seconds())
			}
		})
		return nil
	})
	return hooks
}

// ToMCPTool renders a catalog entry as an MCP tool definition.
func ToMCPTool(t catalog.Tool) mcp.Tool {
	props := make(map[string]any, len(t.Args))
	var required, order []string
	for _, a := range t.Args {
		p := map[string]any{"type": string(a.Type), "description": a.Description}
		if len(a.Enum) > 0 {
			p["enum"] = slices.Clone(a.Enum)
		}
		if a.Default != "" {
			p["default"] = a.Default
		}
		props[a.Name] = p
		order = append(order, a.Name)
		if a.Required {
			required = append(required, a.Name)
		}
	}
	return mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		// Closed: catalog.Validate refuses an undeclared argument, and the schema says so.
		InputSchema: mcp.ToolInputSchema{Type: "object", Properties: props, Required: required, PropertyOrder: order,
			AdditionalProperties: false},
		Annotations: mcp.ToolAnnotation{
			ReadOnlyHint:    mcp.ToBoolPtr(t.Hints.ReadOnly),
			DestructiveHint: mcp.ToBoolPtr(t.Hints.Destructive),
			IdempotentHint:  mcp.ToBoolPtr(t.Hints.Idempotent),
			OpenWorldHint:   mcp.ToBoolPtr(t.Hints.OpenWorld),
		},
	}
}

// backendSetting names the environment variable that configures a target, for errors.
var backendSetting = map[catalog.Target]string{
	catalog.TargetMemory:   "TATARA_MEMORY_URL",
	catalog.TargetChat:     "TATARA_CHAT_URL",
	catalog.TargetOperator: "TATARA_OPERATOR_URL",
}

func (s *Server) handler(t catalog.Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		s.firstCall.Do(func() { s.cfg.Logger.Info("first tool call", "tool", t.Name) })
		text, outcome, err := s.call(ctx, t, req)
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.ToolCalls.WithLabelValues(t.Name, outcome).Inc()
			s.cfg.Metrics.ToolCallDuration.WithLabelValues(t.Name, outcome).Observe(time.Since(start).Seconds())
		}
		if err != nil {
			s.cfg.Logger.Info("tool call failed", "tool", t.Name, "outcome", outcome, "error", err.Error())
			return mcp.NewToolResultError(fmt.Sprintf("%s failed: %v", t.Name, err)), nil
		}
		return mcp.NewToolResultText(text), nil
	}
}

func (s *Server) call(ctx context.Context, t catalog.Tool, req mcp.CallToolRequest) (string, string, error) {
	raw := req.Params.Arguments
	args, isObject := raw.(map[string]any)
	if raw != nil && !isObject {
		return "", obs.OutcomeInvalidArgs, fmt.Errorf("arguments must be a JSON object, got %T", raw)
	}
	args = t.WithDefaults(args, s.cfg.Context)
	if err := t.Validate(args); err != nil {
		return "", obs.OutcomeInvalidArgs, err
	}
	if t.Handler != nil {
		text, err := t.Handler(ctx, catalog.Deps{Logger: s.cfg.Logger, Context: s.cfg.Context, InternalIssues: s.countIssue, RecordIssue: s.cfg.RecordIssue}, args)
		if err != nil {
			var argErr *catalog.ArgError
			if errors.As(err, &argErr) {
				return "", obs.OutcomeInvalidArgs, err
			}
			return "", obs.OutcomeHandlerRejected, err
		}
		return text, obs.OutcomeSuccess, nil
	}
	client := s.cfg.Backends[t.Target]
	if client == nil || client.BaseURL == "" {
		return "", obs.OutcomeBackendMissing, fmt.Errorf("the %s backend is not configured: %s is not set", t.Target, backendSetting[t.Target])
	}
	httpReq, err := t.BuildRequest(args)
	if err != nil {
		return "", obs.OutcomeInvalidArgs, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout+time.Duration(t.WaitSeconds(args))*time.Second)
	defer cancel()
	text, err := client.Do(ctx, httpReq)
	if err != nil {
		return "", obs.OutcomeBackendError, err
	}
	return text, obs.OutcomeSuccess, nil
}

func (s *Server) countIssue(category, severity string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.InternalIssues.WithLabelValues(category, severity).Inc()
	}
}
