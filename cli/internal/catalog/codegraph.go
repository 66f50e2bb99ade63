package catalog

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

var (
	repoArg   = requiredQuery("repo", "Repository name, as in repo_list.")
	entityArg = requiredQuery("entity", "Symbol, file or resource id (from code_search).")
	depthArg  = query("depth", Integer, "Hops to follow (default 1).")
)

// codeTool is a read-only code-graph query: GET /code-graph/<route>?repo=<repo>&...
func codeTool(name, route, desc string, args ...Arg) Tool {
	return Tool{Name: name, Group: GroupCodeGraph, Target: TargetMemory, Hints: Read,
		Method: http.MethodGet, Path: "/code-graph/" + route, Description: desc,
		Args: append([]Arg{repoArg}, args...)}
}

// CodeGraphTools are the 19 code-graph tools (after Part B merged two list/get pairs). The
// directional traversals stay separate tools: their names are the model's selection signal.
func CodeGraphTools() []Tool {
	return []Tool{
		codeTool("code_search", "search", "Find symbols, files and resources by name or text. Start here to get entity ids.",
			requiredQuery("query", "Name or words to find."), query("kind", String, "Only this kind, e.g. function, type, file."), limitArg),
		codeTool("code_entity", "entity", "Show one entity: kind, location, signature, doc.", entityArg),
		codeTool("code_neighbors", "neighbors", "All entities directly linked to an entity, any relation, both directions.", entityArg, depthArg),
		codeTool("code_callers", "callers", "Functions that call this function.", entityArg, depthArg),
		codeTool("code_callees", "callees", "Functions this function calls.", entityArg, depthArg),
		codeTool("code_dependents", "dependents", "Packages or modules that depend on this one.", entityArg, depthArg),
		codeTool("code_dependencies", "dependencies", "Packages or modules this one depends on.", entityArg, depthArg),
		codeTool("code_file_imports", "file-imports", "Imports of one file.", requiredQuery("path", "File path in the repo.")),
		codeTool("code_resource_graph", "resource-graph", "Infrastructure resources (k8s, terraform) linked to an entity.", entityArg, depthArg),
		codeTool("code_cross_repo", "cross-repo", "Uses of an entity from other repositories of the project.", entityArg),
		codeTool("code_path", "path", "Shortest dependency path between two entities.",
			requiredQuery("from", "Start entity id."), requiredQuery("to", "End entity id.")),
		codeTool("code_important", "important", "Most central entities (PageRank): where to start reading.", limitArg),
		codeTool("code_stats", "stats", "Size of the graph: counts by kind and language, last index time."),
		codeTool("code_ambiguous_edges", "ambiguous-edges", "Edges the indexer could not resolve with certainty.", limitArg),
		codeTool("code_explain", "explain", "Plain-language summary of what an entity does and how it is used.", entityArg),
		codeTool("code_related", "related", "Entities similar in name or role to this one.", entityArg, limitArg),
		codeTool("code_bridges", "bridges", "Entities that connect otherwise separate parts of the code.", limitArg),
		codeCommunities(),
		codeHyperedges(),
	}
}

// codeCommunities merges the former code_communities and code_community: with a valid
// community number it reads one community, otherwise it lists them. A malformed number falls
// back to the list silently (spec, resolved decision 1).
func codeCommunities() Tool {
	t := codeTool("code_communities", "communities",
		"Clusters of tightly linked code. Without community: list them. With community: that cluster's members.",
		Arg{Name: "community", Type: Integer, Description: "Community number from the list.", In: InQuery, Lenient: true})
	t.Build = func(args map[string]any) (Request, error) {
		q := url.Values{"repo": {argText(args["repo"])}}
		if n, ok := communityNumber(args["community"]); ok {
			q.Set("community", strconv.FormatInt(n, 10))
			return Request{Method: http.MethodGet, Path: "/code-graph/community", Query: q}, nil
		}
		return Request{Method: http.MethodGet, Path: "/code-graph/communities", Query: q}, nil
	}
	return t
}

func communityNumber(v any) (int64, bool) {
	if v == nil {
		return 0, false
	}
	if s, ok := v.(string); ok {
		v = strings.TrimSpace(s)
	}
	n, ok := asInt(v)
	return n, ok && n >= 0
}

// codeHyperedges merges the former code_hyperedges and code_hyperedge: id reads one
// hyperedge and wins over entity; otherwise it lists them, filtered by entity if given.
func codeHyperedges() Tool {
	t := codeTool("code_hyperedges", "hyperedges",
		"Multi-entity relations (e.g. a request flow). Without id: list, optionally for one entity. With id: that hyperedge.",
		query("id", String, "Hyperedge id; wins over entity."), query("entity", String, "Only hyperedges containing this entity."))
	t.Build = func(args map[string]any) (Request, error) {
		q := url.Values{"repo": {argText(args["repo"])}}
		if id, _ := args["id"].(string); id != "" {
			q.Set("id", id)
			return Request{Method: http.MethodGet, Path: "/code-graph/hyperedge", Query: q}, nil
		}
		if entity, _ := args["entity"].(string); entity != "" {
			q.Set("entity", entity)
		}
		return Request{Method: http.MethodGet, Path: "/code-graph/hyperedges", Query: q}, nil
	}
	return t
}
