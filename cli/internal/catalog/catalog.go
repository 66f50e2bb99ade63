// Package catalog is the agent tool surface as data: one declarative entry per tool, the
// groups they belong to and the profiles that gate them. It has no MCP or HTTP dependency so
// that the operator can import the profile table (through pkg/profiles) and so that the server,
// the `tatara tools` command and the generated docs all read the same single source.
package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"tatara.dev/cli/pkg/internalissue"
)

// Group is the family a tool belongs to; profiles grant whole groups.
type Group string

// The tool groups (docs/architecture.md, "From Task kind to tool list").
const (
	GroupMemory    Group = "memory"
	GroupCodeGraph Group = "code-graph"
	GroupOperator  Group = "operator"
	GroupChat      Group = "chat"
	GroupPlatform  Group = "platform"
)

// Target is the backend a tool's call goes to.
type Target string

// Backends. Memory also serves the code graph.
const (
	TargetMemory   Target = "memory"
	TargetChat     Target = "chat"
	TargetOperator Target = "operator"
	TargetLocal    Target = "local"
)

// ArgType is the JSON Schema type of an argument.
type ArgType string

// Argument types used by the catalog.
const (
	String  ArgType = "string"
	Integer ArgType = "integer"
)

// ArgIn says where the generic builder puts an argument in the HTTP request.
type ArgIn int

// Argument locations.
const (
	InQuery ArgIn = iota
	InPath
	InBody
)

// Arg is one input argument of a tool.
type Arg struct {
	Name        string
	Type        ArgType
	Description string
	Required    bool
	Enum        []string
	Default     string
	In          ArgIn
	// FromEnv names the context value (see Context) used when the agent omits the argument;
	// such an argument is optional in the schema even when the request needs it.
	FromEnv string
	// Lenient skips the type check: the tool's Build closure interprets the value itself (the
	// merged code-graph tools fall back to their list route on a malformed key, by design).
	Lenient bool
}

// Hints are the MCP tool annotations. Every entry sets all four explicitly (mcp-go's
// defaults would claim every tool is destructive and open-world).
type Hints struct {
	ReadOnly, Destructive, Idempotent, OpenWorld bool
}

// Hint presets: each catalog entry names one, so the choice is explicit and reviewable.
var (
	// Read returns data and changes nothing.
	Read = Hints{ReadOnly: true, Idempotent: true}
	// Create adds something new; repeating it adds another.
	Create = Hints{}
	// Update overwrites existing state; repeating it changes nothing more.
	Update = Hints{Destructive: true, Idempotent: true}
	// Delete removes state; repeating it changes nothing more.
	Delete = Hints{Destructive: true, Idempotent: true}
	// Record appends a record the operator keeps once (terminal intents): repeats are no-ops or refused.
	Record = Hints{Idempotent: true}
	// Publish writes something people outside the platform see (issue comments, proposals).
	Publish = Hints{OpenWorld: true}
)

// Request is what a backend tool sends: the generic builder or a Build closure makes it.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Body   map[string]any
}

// Context values a tool call may draw defaults from.
const (
	EnvProject = "project"
	EnvTask    = "task"
)

// Deps are what a local handler may use; the server passes them at call time so the catalog
// stays data.
type Deps struct {
	Logger         *slog.Logger
	Context        map[string]string
	InternalIssues func(category, severity string)
	// RecordIssue hands a valid report to the operator's record (issuerecord); nil when that is
	// off. It must not block.
	RecordIssue func(internalissue.Report)
}

// Tool is one catalog entry.
type Tool struct {
	Name        string
	Group       Group
	Target      Target
	Description string
	Method      string
	// Path is a template; {name} segments are filled from InPath arguments.
	Path  string
	Args  []Arg
	Hints Hints
	// Build replaces the generic builder for tools whose route depends on the arguments.
	Build func(args map[string]any) (Request, error)
	// WaitArg names an integer argument (seconds, at most MaxWaitSeconds) for which the backend
	// may legitimately hold the call open; the server extends that call's timeout by it.
	WaitArg string
	// Handler runs the tool in process instead of calling a backend (Target local).
	Handler func(ctx context.Context, deps Deps, args map[string]any) (string, error)
}

// All returns the whole catalog in its declared order: memory, code-graph, operator, chat, platform.
func All() []Tool {
	var all []Tool
	all = append(all, MemoryTools()...)
	all = append(all, CodeGraphTools()...)
	all = append(all, OperatorTools()...)
	all = append(all, ChatTools()...)
	all = append(all, PlatformTools()...)
	return all
}

// ByName returns the catalog entry with that name.
func ByName(name string) (Tool, bool) {
	i := slices.IndexFunc(All(), func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return All()[i], true
}

// MaxWaitSeconds bounds a WaitArg.
const MaxWaitSeconds = 60

// WaitSeconds returns how long the backend may hold this call open, from the WaitArg argument.
func (t Tool) WaitSeconds(args map[string]any) int64 {
	if t.WaitArg == "" {
		return 0
	}
	n, ok := asInt(args[t.WaitArg])
	if !ok || n < 0 {
		return 0
	}
	return min(n, MaxWaitSeconds)
}

// ArgError is a bad or missing argument; its message names the argument.
type ArgError struct {
	Arg    string
	Reason string
}

func (e *ArgError) Error() string { return fmt.Sprintf("argument %q: %s", e.Arg, e.Reason) }

// WithDefaults returns args with every missing FromEnv argument filled from ctx. Missing means
// absent, null or "": a value of another type is left for Validate to refuse, never replaced by
// the pod's own task or project (the call would act on the wrong object).
func (t Tool) WithDefaults(args map[string]any, ctx map[string]string) map[string]any {
	out := make(map[string]any, len(args)+2)
	for k, v := range args {
		out[k] = v
	}
	for _, a := range t.Args {
		if a.FromEnv == "" || ctx[a.FromEnv] == "" {
			continue
		}
		if v := out[a.Name]; v == nil || v == "" {
			out[a.Name] = ctx[a.FromEnv]
		}
	}
	return out
}

// Validate checks args against the declared arguments: required present and non-empty,
// types right, enum values known, and no argument the tool does not declare.
func (t Tool) Validate(args map[string]any) error {
	declared := make(map[string]bool, len(t.Args))
	for _, a := range t.Args {
		declared[a.Name] = true
		v, present := args[a.Name]
		if s, isString := v.(string); isString && s == "" && a.Default != "" && !a.Required {
			// An empty optional value with a default means "use the default" (the handler applies it).
			present = false
		}
		if !present || v == nil {
			if a.FromEnv != "" && a.In == InPath {
				return &ArgError{Arg: a.Name, Reason: "is required: pass it, or run with TATARA_" + strings.ToUpper(a.FromEnv) + " set"}
			}
			if a.Required {
				return &ArgError{Arg: a.Name, Reason: "is required"}
			}
			continue
		}
		switch a.Type {
		case String:
			s, ok := v.(string)
			if !ok {
				return &ArgError{Arg: a.Name, Reason: fmt.Sprintf("must be a string, got %T", v)}
			}
			if s == "" && (a.Required || a.In == InPath) {
				return &ArgError{Arg: a.Name, Reason: "must not be empty"}
			}
			if len(a.Enum) > 0 && !slices.Contains(a.Enum, s) {
				return &ArgError{Arg: a.Name, Reason: fmt.Sprintf("must be one of %s, got %q", strings.Join(a.Enum, ", "), s)}
			}
		case Integer:
			if a.Lenient {
				continue
			}
			if _, ok := asInt(v); !ok {
				return &ArgError{Arg: a.Name, Reason: fmt.Sprintf("must be an integer, got %v", v)}
			}
		}
	}
	var unknown []string
	for k := range args {
		if !declared[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return &ArgError{Arg: unknown[0], Reason: "is not an argument of " + t.Name}
	}
	return nil
}

// BuildRequest turns validated args into the backend request.
func (t Tool) BuildRequest(args map[string]any) (Request, error) {
	if t.Build != nil {
		return t.Build(args)
	}
	req := Request{Method: t.Method, Path: t.Path, Query: url.Values{}}
	for _, a := range t.Args {
		v, ok := args[a.Name]
		if !ok || v == nil {
			continue
		}
		switch a.In {
		case InPath:
			req.Path = strings.ReplaceAll(req.Path, "{"+a.Name+"}", url.PathEscape(argText(v)))
		case InQuery:
			req.Query.Set(a.Name, argText(v))
		case InBody:
			if req.Body == nil {
				req.Body = map[string]any{}
			}
			if a.Type == Integer {
				n, _ := asInt(v)
				v = n
			}
			req.Body[a.Name] = v
		}
	}
	if strings.Contains(req.Path, "{") {
		return Request{}, fmt.Errorf("failed to build path %q for %s: a path argument is missing", req.Path, t.Name)
	}
	return req, nil
}

// asInt accepts the shapes a JSON integer arrives in (float64 from encoding/json, or a
// numeric string some models send).
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != float64(int64(n)) {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

func argText(v any) string {
	if n, ok := asInt(v); ok {
		if _, isString := v.(string); !isString {
			return strconv.FormatInt(n, 10)
		}
	}
	return fmt.Sprint(v)
}
