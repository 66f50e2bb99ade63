// Package chartdoc renders a chart's README.md from its Chart.yaml and the helm-docs style
// comments of its values.yaml: a `# -- text` comment, possibly continued on the `#` lines right
// after it, documents the key below it. The README lists every documented key by its dotted path
// (image.repository) with its type and default. The charts module's tests keep each chart's
// README.md equal to Render's output (make update-golden rewrites them) and require every leaf
// key to be documented (Undocumented).
package chartdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Value is one key of a values file.
type Value struct {
	// Key is the dotted path (image.repository); a dot inside a key is escaped as in
	// `helm --set` (grafana\.com/folder).
	Key string
	// Type is string, int, float, bool, null, object or list.
	Type string
	// Default is the value in values.yaml as compact JSON (map keys in file order).
	Default string
	// Description is the `# --` comment, its lines joined; empty when the key has none.
	Description string
	// Leaf is true for a key whose value is not a map with keys of its own (a scalar, a list, {}).
	Leaf bool
}

// docMarker starts a documenting comment.
const docMarker = "# --"

// ParseValues returns every key of a values file, parents before their children, in file order.
func ParseValues(src []byte) ([]Value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil // empty file
	} else if err != nil {
		return nil, fmt.Errorf("parse values: %w", err)
	}
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse values: want one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("parse values: want one YAML document")
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("parse values: the top level is not a map")
	}
	// yaml.v3 gives the comment above the first key to the document when a blank line separates
	// it from the file's header comment; it still documents that key.
	var out []Value
	err := walk(root, "", strings.TrimSpace(doc.HeadComment+"\n"+root.HeadComment), &out)
	return out, err
}

// walk appends the keys of mapping m under prefix; firstHead is extra head comment text of its
// first key.
func walk(m *yaml.Node, prefix, firstHead string, out *[]Value) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return fmt.Errorf("line %d: only plain keys are supported (no merge keys)", k.Line)
		}
		head := k.HeadComment
		if i == 0 && strings.TrimSpace(head) == "" {
			head = firstHead
		}
		key := strings.ReplaceAll(k.Value, ".", `\.`)
		if prefix != "" {
			key = prefix + "." + key
		}
		v = resolve(v)
		def, err := toJSON(v)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", k.Line, key, err)
		}
		val := Value{
			Key:         key,
			Type:        typeOf(v),
			Default:     def,
			Description: description(head),
			Leaf:        v.Kind != yaml.MappingNode || len(v.Content) == 0,
		}
		*out = append(*out, val)
		if !val.Leaf {
			if err := walk(v, key, "", out); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// description extracts the `# --` text from a head comment: the last paragraph's `# --` line and
// every comment line after it, joined with spaces. Comment lines before the marker (or in an
// earlier paragraph) are not documentation.
func description(head string) string {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			start = -1 // a blank line ends a paragraph: a marker above it documents nothing here
		case strings.HasPrefix(l, docMarker):
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	var words []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if i == 0 {
			l = strings.TrimPrefix(l, docMarker)
		} else {
			l = strings.TrimPrefix(l, "#")
		}
		if l = strings.TrimSpace(l); l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " ")
}

// typeOf names the type of a value as the README shows it.
func typeOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "list"
	}
	switch n.ShortTag() {
	case "!!int":
		return "int"
	case "!!float":
		return "float"
	case "!!bool":
		return "bool"
	case "!!null":
		return "null"
	}
	return "string"
}

// toJSON encodes a value as compact JSON, keeping the file's key order.
func toJSON(n *yaml.Node) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, n); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, n *yaml.Node) error {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		j, err := json.Marshal(v)
		if err != nil { // .inf, .nan: no JSON form
			j, _ = json.Marshal(n.Value)
		}
		b.Write(j)
	default:
		return fmt.Errorf("unsupported YAML node kind %d", n.Kind)
	}
	return nil
}

// Undocumented returns the leaf keys without a `# --` comment.
func Undocumented(values []Value) []string {
	var keys []string
	for _, v := range values {
		if v.Leaf && v.Description == "" {
			keys = append(keys, v.Key)
		}
	}
	return keys
}

// Chart is what the README takes from Chart.yaml.
type Chart struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// ParseChart reads the name and description of a Chart.yaml.
func ParseChart(src []byte) (Chart, error) {
	var c Chart
	if err := yaml.Unmarshal(src, &c); err != nil {
		return Chart{}, fmt.Errorf("parse Chart.yaml: %w", err)
	}
	if c.Name == "" {
		return Chart{}, errors.New("parse Chart.yaml: no name")
	}
	return c, nil
}

// Render renders the README of a chart that helmfile installs into namespace: a title, the
// chart's description, how to install it, and the table of the documented values.
func Render(c Chart, values []Value, namespace string) []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated by charts/internal/chartdoc from Chart.yaml and the `# --` comments of values.yaml:\n")
	b.WriteString("     edit those, then run `make update-golden`. -->\n\n")
	fmt.Fprintf(&b, "# %s\n\n", c.Name)
	if d := strings.TrimSpace(c.Description); d != "" {
		fmt.Fprintf(&b, "%s\n\n", escapeText(d))
	}
	fmt.Fprintf(&b, "Install it with every other Tatara chart, in rollout order and at the pinned versions, "+
		"with helmfile from the repository root (`helmfile -f helmfile/helmfile.yaml -e production apply`, "+
		"see [docs/packaging.md](../../docs/packaging.md)), or on its own with helm: "+
		"`helm install %[1]s charts/%[1]s --namespace %[2]s --create-namespace`.\n\n", c.Name, namespace)
	b.WriteString("## Values\n\n")
	b.WriteString("| Key | Type | Default | Description |\n")
	b.WriteString("|-----|------|---------|-------------|\n")
	for _, v := range values {
		if v.Description == "" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(v.Key), v.Type, code(v.Default), escapeText(v.Description))
	}
	return b.Bytes()
}

// RenderDir renders the README of the chart in dir.
func RenderDir(dir, namespace string) ([]byte, error) {
	chartSrc, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	c, err := ParseChart(chartSrc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	valuesSrc, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	values, err := ParseValues(valuesSrc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "values.yaml"), err)
	}
	return Render(c, values, namespace), nil
}

// code writes s as an inline code span of a table cell: a backtick inside gets a longer fence,
// and `|` is escaped (GitHub splits cells on it even inside code).
func code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if fence != "`" || strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// escapeText makes comment text safe in a table cell: `|` is escaped everywhere, and outside code
// spans `<` and `>` are escaped so that placeholders such as <namespace> are not taken for HTML.
func escapeText(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	parts := strings.Split(s, "`")
	for i := range parts {
		// Even parts are outside code spans; after an unclosed backtick the rest is plain text.
		if i%2 == 0 || (len(parts)%2 == 0 && i == len(parts)-1) {
			parts[i] = strings.NewReplacer("<", `\<`, ">", `\>`).Replace(parts[i])
		}
	}
	return strings.Join(parts, "`")
}
