// Package agent prepares and runs the agent CLI (Claude Code in production): the MCP config it
// reads, its flags, its environment, and the process itself with signal forwarding and exit-code
// reporting.
package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tatara.dev/cli/pkg/agentpod"
)

// MCPServerName is the key of the cli's MCP server in the config the wrapper writes. The agent CLI
// names its tools mcp__<MCPServerName>__<tool>, which is what the transcript tailer matches.
const MCPServerName = "tatara"

// DefaultMCPURL is the cli sidecar's streamable HTTP endpoint inside the agent pod.
const DefaultMCPURL = agentpod.MCPURL

// MCPConfig is the agent CLI's --mcp-config file format.
type MCPConfig struct {
	MCPServers map[string]MCPServer `json:"mcpServers"`
}

// MCPServer is one server entry; Type "http" is streamable HTTP.
type MCPServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// NewMCPConfig returns the config naming only the tatara server at url.
func NewMCPConfig(url string) MCPConfig {
	return MCPConfig{MCPServers: map[string]MCPServer{MCPServerName: {Type: "http", URL: url}}}
}

// WriteMCPConfig writes the config for url to path (mode 0600: it may one day carry headers).
func WriteMCPConfig(path, url string) error {
	data, err := json.Marshal(NewMCPConfig(url))
	if err != nil {
		return fmt.Errorf("failed to encode MCP config %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("failed to create directory for MCP config %q: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("failed to write MCP config %q: %w", path, err)
	}
	return nil
}

// UserSettingsFile is the agent CLI's user settings in its config dir: with SettingSources, the
// only settings it reads.
const UserSettingsFile = "settings.json"

// UserSettings are the agent CLI's user settings for an agent with environment env. Behind an
// egress proxy (env names one) WebFetch skips its preflight, a domain check the CLI sends to the
// model vendor's API before each new host: with it, no fetch works unless that API is on the
// allow-list, and being on it would give the agent a way out to an API that takes any key.
// The allow-list is the check there. Without a proxy there are none, and the CLI keeps its defaults.
func UserSettings(env []string) map[string]any {
	if !proxied(env) {
		return nil
	}
	return map[string]any{"skipWebFetchPreflight": true}
}

// WriteUserSettings writes UserSettings(env), if any, to configDir's UserSettingsFile.
func WriteUserSettings(configDir string, env []string) error {
	settings := UserSettings(env)
	if settings == nil {
		return nil
	}
	data, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("failed to encode the agent CLI's settings: %w", err)
	}
	path := filepath.Join(configDir, UserSettingsFile)
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("failed to write the agent CLI's settings %q: %w", path, err)
	}
	return nil
}

// PermissionMode lets the agent act without prompts: nobody is there to answer them, and the pod
// is the sandbox.
const PermissionMode = "bypassPermissions"

// SettingSources are the only settings the agent CLI reads: the user's, in CLAUDE_CONFIG_DIR, which
// the wrapper owns. The workspace is a clone of code that another agent may have written (a review
// Task clones the branch under review), so its .claude/settings*.json must not give the CLI hooks
// (code run before the model's first turn, with the API key in its environment), env (a model
// base URL of its choosing), permissions, plugins or MCP servers. Without "project" the CLI also
// loads no CLAUDE.md, skills, agents or commands from the workspace (skills and agents can carry
// hooks too): the agent may still read those files, as data, like any other file.
const SettingSources = "user"

// Args returns the agent CLI's arguments for one non-interactive run. --mcp-config takes several
// values, so it is written as --mcp-config=<path> to keep it from swallowing the prompt, which
// goes last, after "--": a directive that starts with "-" (a markdown bullet) is still the prompt.
func Args(mcpConfigPath, sessionID, prompt string) []string {
	return []string{
		"-p",
		"--output-format", "stream-json",
		"--verbose",
		"--mcp-config=" + mcpConfigPath,
		"--strict-mcp-config",
		"--setting-sources=" + SettingSources,
		"--session-id", sessionID,
		"--permission-mode", PermissionMode,
		"--", prompt,
	}
}

// ConfigDirEnv is where the agent CLI keeps its state, transcripts included.
const ConfigDirEnv = "CLAUDE_CONFIG_DIR"

// BreakingEnv are inherited variables known to break the run, dropped from the agent's
// environment: CLAUDE_CODE_CHILD_SESSION turns transcript saving off, so the wrapper would see
// nothing. Every other CLAUDE_CODE_* variable (CLAUDE_CODE_MAX_OUTPUT_TOKENS, ...) passes through
// from the Project's extraEnvs.
var BreakingEnv = []string{"CLAUDE_CODE_CHILD_SESSION"}

// DefaultEnv is set for the agent unless its environment already sets the variable: an agent pod
// sends nothing beyond its model and its MCP server. DISABLE_TELEMETRY and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC each stop the CLI's calls to its vendor's telemetry and
// update hosts, which an egress-restricted pod could not reach anyway.
var DefaultEnv = []string{"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}

// FixedEnv is set for the agent whatever its environment says, so a Project's extraEnvs cannot
// turn it off. CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1 keeps the CLI from putting the repository's
// git status and recent commit subjects into its system prompt: every repository a Task clones is
// untrusted input (a review clones the implementer's branch), and its last commit's subject would
// otherwise reach the model before the agent has read anything. The agent can still run git log.
var FixedEnv = []string{"CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS=1"}

// Env returns the agent's environment: parent minus BreakingEnv, an inherited CLAUDE_CONFIG_DIR,
// FixedEnv's variables and the variables in drop; then DefaultEnv entries the parent does not
// set; then FixedEnv and CLAUDE_CONFIG_DIR=configDir (the wrapper tails the transcript there, so
// it is not negotiable).
func Env(parent []string, configDir string, drop ...string) []string {
	out := make([]string, 0, len(parent)+len(DefaultEnv)+len(FixedEnv)+1)
	fixed := map[string]bool{ConfigDirEnv: true}
	for _, kv := range FixedEnv {
		name, _, _ := strings.Cut(kv, "=")
		fixed[name] = true
	}
	set := map[string]bool{}
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if fixed[name] || contains(BreakingEnv, name) || contains(drop, name) {
			continue
		}
		set[name] = true
		out = append(out, kv)
	}
	for _, kv := range DefaultEnv {
		if name, _, _ := strings.Cut(kv, "="); !set[name] {
			out = append(out, kv)
		}
	}
	out = append(exemptLoopbackFromProxies(out), FixedEnv...)
	return append(out, ConfigDirEnv+"="+configDir)
}

// proxyEnv are the variables that send the agent CLI's HTTP through a proxy.
var proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// loopbackHosts are what the agent reaches inside its pod: its MCP server, the cli sidecar, on
// 127.0.0.1.
var loopbackHosts = []string{"127.0.0.1", "localhost"}

// exemptLoopbackFromProxies adds loopbackHosts to NO_PROXY and no_proxy when env names a proxy: a
// Project that routes the agent through its proxy (extraEnvs) would otherwise send the agent's
// MCP connection to the proxy too, and the agent would run without its tools.
func exemptLoopbackFromProxies(env []string) []string {
	if !proxied(env) {
		return env
	}
	values := envValues(env)
	for _, name := range []string{"NO_PROXY", "no_proxy"} {
		var entries []string
		for e := range strings.SplitSeq(values[name], ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
		missing := false
		for _, host := range loopbackHosts {
			if !contains(entries, host) {
				entries, missing = append(entries, host), true
			}
		}
		if !missing {
			continue
		}
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
		env = append(env, name+"="+strings.Join(entries, ","))
	}
	return env
}

// proxied reports whether env names a proxy for the agent CLI's HTTP.
func proxied(env []string) bool {
	values := envValues(env)
	return slices.ContainsFunc(proxyEnv, func(name string) bool { return values[name] != "" })
}

func envValues(env []string) map[string]string {
	values := make(map[string]string, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		values[name] = value
	}
	return values
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
