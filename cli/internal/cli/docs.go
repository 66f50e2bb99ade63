package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"tatara.dev/cli/internal/catalog"
)

// ProfileTable renders the README's table of Task kinds and their profiles from the catalog,
// between the markers profileTableBegin and profileTableEnd.
func ProfileTable() string {
	var b strings.Builder
	b.WriteString("| Task kind | profile | chat | tools |\n|---|---|---|---|\n")
	for _, kind := range catalog.Kinds() {
		profile := catalog.ProfileForKind(kind)
		tools, _ := catalog.ProfileTools(profile)
		chat := "no"
		for _, t := range catalog.ChatTools() {
			if tools[t.Name] {
				chat = "yes"
				break
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", kind, profile, chat, len(tools))
	}
	fmt.Fprintf(&b, "| anything else, or unset | \"\" (fail-open, WARN log) | yes | %d |\n", len(catalog.All()))
	return b.String()
}

// The README's generated profile table sits between these lines.
const (
	profileTableBegin = "<!-- profile table: generated from the cli catalog by `make generate`; do not edit -->\n"
	profileTableEnd   = "<!-- end of profile table -->\n"
)

// ToolReference renders the per-profile tool reference (docs/tools.md) from the catalog.
func ToolReference() string {
	var b strings.Builder
	names := catalog.ProfileNames()
	sets := map[string]map[string]bool{}
	b.WriteString("# Tool reference\n\n<!-- Generated from the catalog by `make generate`; do not edit. -->\n\n")
	b.WriteString("Profiles are set per Task kind through `TATARA_TOOL_PROFILE`; an empty or unknown profile serves every tool.\n\n")
	b.WriteString("| profile | tools |\n|---|---|\n")
	for _, p := range names {
		sets[p], _ = catalog.ProfileTools(p)
		fmt.Fprintf(&b, "| %s | %d |\n", p, len(sets[p]))
	}
	fmt.Fprintf(&b, "| \"\" or unknown (fail-open) | %d |\n\n", len(catalog.All()))

	b.WriteString("## Membership\n\n| tool | group | " + strings.Join(names, " | ") + " |\n|---|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, t := range catalog.All() {
		fmt.Fprintf(&b, "| %s | %s |", t.Name, t.Group)
		for _, p := range names {
			mark := " "
			if sets[p][t.Name] {
				mark = "x"
			}
			fmt.Fprintf(&b, " %s |", mark)
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Tools\n")
	for _, t := range catalog.All() {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", t.Name, t.Description)
		fmt.Fprintf(&b, "Group `%s`, backend `%s`", t.Group, t.Target)
		if t.Method != "" {
			fmt.Fprintf(&b, " (`%s %s`)", t.Method, t.Path)
		}
		fmt.Fprintf(&b, ". Hints: readOnly=%t destructive=%t idempotent=%t openWorld=%t.\n", t.Hints.ReadOnly, t.Hints.Destructive, t.Hints.Idempotent, t.Hints.OpenWorld)
		if len(t.Args) == 0 {
			continue
		}
		b.WriteString("\n| argument | type | required | description |\n|---|---|---|---|\n")
		for _, a := range t.Args {
			desc := a.Description
			if len(a.Enum) > 0 {
				desc += " One of: `" + strings.Join(a.Enum, "`, `") + "`."
			}
			if a.FromEnv != "" {
				desc += " Default: `TATARA_" + strings.ToUpper(a.FromEnv) + "`."
			}
			fmt.Fprintf(&b, "| %s | %s | %t | %s |\n", a.Name, a.Type, a.Required, desc)
		}
	}
	return b.String()
}

// countMarker is a count stated in the docs, kept equal to the catalog's: written as
// <!-- count:KEY -->N<!-- /count -->, where KEY is "tools" (every tool), "group:<group>" or
// "profile:<profile>". make generate rewrites N; make test fails on a stale or unknown one.
var countMarker = regexp.MustCompile(`<!-- count:([a-zA-Z:-]+) -->(\d*)<!-- /count -->`)

// CatalogCount is the number a count marker's key names, false for an unknown key.
func CatalogCount(key string) (int, bool) {
	kind, name, _ := strings.Cut(key, ":")
	switch kind {
	case "tools":
		return len(catalog.All()), name == ""
	case "group":
		n := 0
		for _, t := range catalog.All() {
			if string(t.Group) == name {
				n++
			}
		}
		return n, n > 0
	case "profile":
		tools, ok := catalog.ProfileTools(name)
		return len(tools), ok && slices.Contains(catalog.ProfileNames(), name)
	}
	return 0, false
}

// UpdateCounts returns doc with every count marker set to the catalog's number, and the keys it
// does not know.
func UpdateCounts(doc string) (string, []string) {
	var unknown []string
	out := countMarker.ReplaceAllStringFunc(doc, func(m string) string {
		key := countMarker.FindStringSubmatch(m)[1]
		n, ok := CatalogCount(key)
		if !ok {
			unknown = append(unknown, key)
			return m
		}
		return fmt.Sprintf("<!-- count:%s -->%d<!-- /count -->", key, n)
	})
	return out, unknown
}
