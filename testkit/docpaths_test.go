package testkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameExistingPaths: every repository path a doc names in backticks (`cli/internal/...`,
// or relative to the module in a module's README) and every relative link target exists, so a moved or deleted file cannot leave a doc pointing
// at nothing.
func TestDocsNameExistingPaths(t *testing.T) {
	root := filepath.Join("..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(root, "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(append(docs, filepath.Join(root, "README.md")), more...)
	tops := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	// Build output (./bin, e2e-logs: the top-level dirs .gitignore names) is no part of the tree a
	// doc may point into, and exists only after a build: a path into it is not checked.
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok && strings.HasSuffix(name, "/") && !strings.Contains(name, "*") {
			delete(tops, strings.TrimSuffix(name, "/"))
		}
	}
	checked := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		rel, _ := filepath.Rel(root, doc)
		for _, m := range repoPath.FindAllStringSubmatch(text, -1) {
			p := strings.TrimRight(m[1], ".,:;")
			if !tops[strings.SplitN(p, "/", 2)[0]] || strings.ContainsAny(p, "<>*{}$") {
				continue
			}
			checked++
			// A module's README names its own paths relative to the module.
			_, errModule := os.Stat(filepath.Join(filepath.Dir(doc), p))
			if _, err := os.Stat(filepath.Join(root, p)); err != nil && errModule != nil {
				t.Errorf("%s names %s, which does not exist", rel, p)
			}
		}
		for _, m := range relativeLink.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d paths found in %d docs: the patterns no longer match the docs", checked, len(docs))
	}
}

var (
	// repoPath is a backticked path with at least one slash: `cli/internal/catalog/profiles.go`.
	repoPath = regexp.MustCompile("`([A-Za-z0-9_.-]+/[A-Za-z0-9_./-]*)`")
	// relativeLink is a Markdown link's target.
	relativeLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)
