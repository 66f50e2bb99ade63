package chartdoc

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []Value
	}{
		{
			name: "scalar types",
			src: `# -- A string.
s: text
# -- An int.
i: 8080
# -- A float.
f: 0.5
# -- A bool.
b: false
# -- A null.
n:
# -- A quoted number stays a string.
q: "1"
# -- A duration is a string.
d: 30s
`,
			want: []Value{
				{Key: "s", Type: "string", Default: `"text"`, Description: "A string.", Leaf: true},
				{Key: "i", Type: "int", Default: `8080`, Description: "An int.", Leaf: true},
				{Key: "f", Type: "float", Default: `0.5`, Description: "A float.", Leaf: true},
				{Key: "b", Type: "bool", Default: `false`, Description: "A bool.", Leaf: true},
				{Key: "n", Type: "null", Default: `null`, Description: "A null.", Leaf: true},
				{Key: "q", Type: "string", Default: `"1"`, Description: "A quoted number stays a string.", Leaf: true},
				{Key: "d", Type: "string", Default: `"30s"`, Description: "A duration is a string.", Leaf: true},
			},
		},
		{
			name: "nested keys get dotted paths, parents come first with their whole default",
			src: `# -- Image.
image:
  # -- Repository.
  repository: example/app
  # -- Tag.
  tag: ""
  # -- Pull secrets.
  pull:
    # -- Policy.
    policy: Always
`,
			want: []Value{
				{Key: "image", Type: "object", Default: `{"repository":"example/app","tag":"","pull":{"policy":"Always"}}`, Description: "Image."},
				{Key: "image.repository", Type: "string", Default: `"example/app"`, Description: "Repository.", Leaf: true},
				{Key: "image.tag", Type: "string", Default: `""`, Description: "Tag.", Leaf: true},
				{Key: "image.pull", Type: "object", Default: `{"policy":"Always"}`, Description: "Pull secrets."},
				{Key: "image.pull.policy", Type: "string", Default: `"Always"`, Description: "Policy.", Leaf: true},
			},
		},
		{
			name: "empty maps and lists are leaves",
			src: `# -- Labels.
labels: {}
# -- Hosts.
hosts:
  - a
  - b
# -- Ports.
ports: [{name: http, port: 80}]
`,
			want: []Value{
				{Key: "labels", Type: "object", Default: `{}`, Description: "Labels.", Leaf: true},
				{Key: "hosts", Type: "list", Default: `["a","b"]`, Description: "Hosts.", Leaf: true},
				{Key: "ports", Type: "list", Default: `[{"name":"http","port":80}]`, Description: "Ports.", Leaf: true},
			},
		},
		{
			name: "multi-line comments are joined, text before the marker is not documentation",
			src: `# Values of the chart.

# -- First line
# second line,
#   indented third line.
a: 1
# A note for maintainers, not users.
# -- The documentation.
# More of it.
b: 2
`,
			want: []Value{
				{Key: "a", Type: "int", Default: `1`, Description: "First line second line, indented third line.", Leaf: true},
				{Key: "b", Type: "int", Default: `2`, Description: "The documentation. More of it.", Leaf: true},
			},
		},
		{
			name: "keys without a marker comment have no description",
			src: `# Values of the chart.
plain: 1
# A comment without the marker.
commented: 2
# -- Documented.
parent:
  child: x
trailing: 3 # -- a line comment is not helm-docs documentation
`,
			want: []Value{
				{Key: "plain", Type: "int", Default: `1`, Leaf: true},
				{Key: "commented", Type: "int", Default: `2`, Leaf: true},
				{Key: "parent", Type: "object", Default: `{"child":"x"}`, Description: "Documented."},
				{Key: "parent.child", Type: "string", Default: `"x"`, Leaf: true},
				{Key: "trailing", Type: "int", Default: `3`, Leaf: true},
			},
		},
		{
			name: "a marker in an earlier paragraph does not document the key",
			src: `a: 1
# -- Orphaned documentation.

# Unrelated note.
b: 2
`,
			want: []Value{
				{Key: "a", Type: "int", Default: `1`, Leaf: true},
				{Key: "b", Type: "int", Default: `2`, Leaf: true},
			},
		},
		{
			name: "the first key is documented right under the file header",
			src: `# Values of the chart.
# -- The first key.
first: 1
`,
			want: []Value{
				{Key: "first", Type: "int", Default: `1`, Description: "The first key.", Leaf: true},
			},
		},
		{
			name: "dots in keys are escaped, map key order is kept",
			src: `# -- Labels.
labels:
  # -- Folder.
  grafana.com/folder: Tatara
  # -- Zeta before alpha.
  zeta: 1
  # -- Alpha.
  alpha: 2
`,
			want: []Value{
				{Key: "labels", Type: "object", Default: `{"grafana.com/folder":"Tatara","zeta":1,"alpha":2}`, Description: "Labels."},
				{Key: `labels.grafana\.com/folder`, Type: "string", Default: `"Tatara"`, Description: "Folder.", Leaf: true},
				{Key: "labels.zeta", Type: "int", Default: `1`, Description: "Zeta before alpha.", Leaf: true},
				{Key: "labels.alpha", Type: "int", Default: `2`, Description: "Alpha.", Leaf: true},
			},
		},
		{
			name: "aliases take the anchored value",
			src: `# -- Base.
base: &b {x: 1}
# -- Copy.
copy: *b
`,
			want: []Value{
				{Key: "base", Type: "object", Default: `{"x":1}`, Description: "Base."},
				{Key: "base.x", Type: "int", Default: `1`, Leaf: true},
				{Key: "copy", Type: "object", Default: `{"x":1}`, Description: "Copy."},
				{Key: "copy.x", Type: "int", Default: `1`, Leaf: true},
			},
		},
		{name: "empty file", src: "", want: nil},
		{name: "only comments", src: "# nothing here\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseValues([]byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseValues:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseValuesRejects(t *testing.T) {
	for name, src := range map[string]string{
		"invalid YAML":   "a: [",
		"top-level list": "- a\n",
		"merge key":      "base: &b {x: 1}\nother:\n  <<: *b\n",
		"two documents":  "a: 1\n---\nb: 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseValues([]byte(src)); err == nil {
				t.Error("ParseValues accepted it")
			}
		})
	}
}

func TestUndocumented(t *testing.T) {
	values, err := ParseValues([]byte(`# -- Documented parent.
a:
  # -- Documented leaf.
  b: 1
  c: 2
d:
  e: {}
# -- Documented empty map.
f: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	// d is an undocumented parent: only leaves must be documented.
	if got, want := Undocumented(values), []string{"a.c", "d.e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Undocumented = %q, want %q", got, want)
	}
}

func TestParseChart(t *testing.T) {
	c, err := ParseChart([]byte("apiVersion: v2\nname: demo\ndescription: >-\n  A demo\n  chart.\nversion: 0.1.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Chart{Name: "demo", Description: "A demo chart."}); c != want {
		t.Errorf("ParseChart = %+v, want %+v", c, want)
	}
	if _, err := ParseChart([]byte("description: nameless\n")); err == nil {
		t.Error("ParseChart accepted a chart without a name")
	}
}

func TestRender(t *testing.T) {
	values, err := ParseValues([]byte(`# -- Image of the ` + "`demo`" + ` binary.
image:
  # -- Repository, without a tag.
  repository: example/demo
  undocumented: x
# -- URL: http://<name>.<namespace>.svc, or ` + "`<kept>`" + `; a | b.
url: ""
`))
	if err != nil {
		t.Fatal(err)
	}
	got := string(Render(Chart{Name: "demo", Description: "The <demo> chart."}, values, "demo-system"))
	for _, want := range []string{
		"make update-golden",
		"\n# demo\n\nThe \\<demo\\> chart.\n",
		"`helm install demo charts/demo --namespace demo-system --create-namespace`",
		"helmfile -f helmfile/helmfile.yaml",
		"| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n",
		"| `image` | object | `{\"repository\":\"example/demo\",\"undocumented\":\"x\"}` | Image of the `demo` binary. |\n",
		"| `image.repository` | string | `\"example/demo\"` | Repository, without a tag. |\n",
		"| `url` | string | `\"\"` | URL: http://\\<name\\>.\\<namespace\\>.svc, or `<kept>`; a \\| b. |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("README lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "image.undocumented") {
		t.Errorf("README lists an undocumented key:\n%s", got)
	}
}

func TestCode(t *testing.T) {
	tests := map[string]string{
		`"plain"`: "`\"plain\"`",
		`a|b`:     "`a\\|b`",
		"a`b":     "`` a`b ``",
	}
	for in, want := range tests {
		if got := code(in); got != want {
			t.Errorf("code(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeText(t *testing.T) {
	tests := map[string]string{
		"<a> `<b>` <c>": "\\<a\\> `<b>` \\<c\\>",
		"open `<a>":     "open `\\<a\\>",
		"x | y":         "x \\| y",
	}
	for in, want := range tests {
		if got := escapeText(in); got != want {
			t.Errorf("escapeText(%q) = %q, want %q", in, got, want)
		}
	}
}
