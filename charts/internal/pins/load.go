package pins

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// scalar is one YAML scalar with its position in the file, so it can be rewritten in place.
type scalar struct {
	file  string
	value string
	line  int // 1-based
	col   int // 1-based
	style yaml.Style
}

func (s scalar) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// readYAML parses a file and returns the root mapping of its one document; a multi-document file
// (helmfile.yaml keeps environments in a part of their own) yields the first document that has
// the key want.
func readYAML(root, rel, want string) (*yaml.Node, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, fmt.Errorf("failed to read %q: %w", rel, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("failed to load %q: no YAML document has %q", rel, want)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to parse %q: %w", rel, err)
		}
		if len(doc.Content) == 1 && lookup(doc.Content[0], want) != nil {
			return doc.Content[0], nil
		}
	}
}

// lookup follows mapping keys from n and returns the node found, or nil.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

func toScalar(file string, n *yaml.Node) (scalar, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return scalar{}, false
	}
	return scalar{file: file, value: n.Value, line: n.Line, col: n.Column, style: n.Style}, true
}

// Chart is the version pins of one Chart.yaml.
type Chart struct {
	Name       string
	Version    scalar
	AppVersion scalar
}

// Release is the pins of one helmfile release.
type Release struct {
	Name     string
	Version  scalar
	ImageTag scalar
	HasTag   bool
	Needs    []string
}

// AgentImage is project.agentImage of one helmfile environment.
type AgentImage struct {
	// Ref is the whole image reference.
	Ref string
	// Name is the image name without registry and tag.
	Name string
	// Tag points at the image reference; its value is only the tag, so Bump rewrites just that.
	Tag scalar
}

// State is every pin of the repository.
type State struct {
	Charts   map[string]Chart
	Releases []Release
	// Vars are the NAME=value lines of hack/versions.env.
	Vars map[string]scalar
	// AgentImages are the project.agentImage pins, by environment file.
	AgentImages map[string]AgentImage
	// PinnedTags are the tags MonitoringValuesPath gives the PinnedImages, by image name.
	PinnedTags map[string]scalar
}

// Load reads the pins under root (the repository root).
func Load(root string) (*State, error) {
	st := &State{Charts: map[string]Chart{}, AgentImages: map[string]AgentImage{}, PinnedTags: map[string]scalar{}}
	for _, c := range Components {
		for _, name := range c.Charts {
			rel := filepath.ToSlash(filepath.Join("charts", name, "Chart.yaml"))
			doc, err := readYAML(root, rel, "version")
			if err != nil {
				return nil, err
			}
			if got, _ := toScalar(rel, lookup(doc, "name")); got.value != name {
				return nil, fmt.Errorf("failed to load chart %q: %s has name %q", name, rel, got.value)
			}
			v, ok := toScalar(rel, lookup(doc, "version"))
			if !ok {
				return nil, fmt.Errorf("failed to load chart %q: %s has no version", name, rel)
			}
			av, ok := toScalar(rel, lookup(doc, "appVersion"))
			if !ok {
				return nil, fmt.Errorf("failed to load chart %q: %s has no appVersion", name, rel)
			}
			st.Charts[name] = Chart{Name: name, Version: v, AppVersion: av}
		}
	}

	doc, err := readYAML(root, HelmfilePath, "releases")
	if err != nil {
		return nil, err
	}
	rels := lookup(doc, "releases")
	if rels == nil || rels.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("failed to load %q: no releases list", HelmfilePath)
	}
	for _, r := range rels.Content {
		name, _ := toScalar(HelmfilePath, lookup(r, "name"))
		rel := Release{Name: name.value}
		if v, ok := toScalar(HelmfilePath, lookup(r, "version")); ok {
			rel.Version = v
		}
		if needs := lookup(r, "needs"); needs != nil {
			for _, n := range needs.Content {
				rel.Needs = append(rel.Needs, n.Value)
			}
		}
		if vals := lookup(r, "values"); vals != nil {
			for _, v := range vals.Content {
				if tag, ok := toScalar(HelmfilePath, lookup(v, "image", "tag")); ok {
					rel.ImageTag, rel.HasTag = tag, true
				}
			}
		}
		st.Releases = append(st.Releases, rel)
	}

	if st.Vars, err = readEnv(root, VersionsEnvPath); err != nil {
		return nil, err
	}
	for _, c := range Components {
		if _, ok := st.Vars[c.VersionVar]; c.VersionVar != "" && !ok {
			return nil, fmt.Errorf("failed to load %q: no %s (the version of component %s)", VersionsEnvPath, c.VersionVar, c.Name)
		}
	}
	values, err := readYAML(root, MonitoringValuesPath, PinnedImages[0].ValuesTag[0])
	if err != nil {
		return nil, err
	}
	for _, img := range PinnedImages {
		if _, ok := st.Vars[img.VersionVar]; !ok {
			return nil, fmt.Errorf("failed to load %q: no %s (the tag of image %s)", VersionsEnvPath, img.VersionVar, img.Name)
		}
		tag, ok := toScalar(MonitoringValuesPath, lookup(values, img.ValuesTag...))
		if !ok {
			return nil, fmt.Errorf("failed to load %q: no %s (the tag of image %s)", MonitoringValuesPath, strings.Join(img.ValuesTag, "."), img.Name)
		}
		st.PinnedTags[img.Name] = tag
	}

	for _, c := range Components {
		for _, env := range c.AgentImageEnvs {
			doc, err := readYAML(root, env, "project")
			if err != nil {
				return nil, err
			}
			img, ok := toScalar(env, lookup(doc, "project", "agentImage"))
			if !ok {
				return nil, fmt.Errorf("failed to load %q: no project.agentImage", env)
			}
			name, tag, found := strings.Cut(img.value[strings.LastIndex(img.value, "/")+1:], ":")
			if !found {
				return nil, fmt.Errorf("failed to load %q: project.agentImage %q has no tag", env, img.value)
			}
			ai := AgentImage{Ref: img.value, Name: name, Tag: img}
			ai.Tag.value = tag
			st.AgentImages[env] = ai
		}
	}
	return st, nil
}

// readEnv parses a file of plain NAME=value lines (blank lines and # comments aside); each value
// is a scalar starting right after the "=", so Bump can rewrite it in place.
func readEnv(root, rel string) (map[string]scalar, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, fmt.Errorf("failed to read %q: %w", rel, err)
	}
	vars := map[string]scalar{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || !envName.MatchString(name) {
			return nil, fmt.Errorf("failed to parse %s:%d: %q is not a NAME=value line", rel, i+1, line)
		}
		if prev, dup := vars[name]; dup {
			return nil, fmt.Errorf("failed to parse %s:%d: %s is already set at %s", rel, i+1, name, prev)
		}
		vars[name] = scalar{file: rel, value: value, line: i + 1, col: len(name) + 2}
	}
	return vars, nil
}

func (st *State) release(name string) (Release, bool) {
	for _, r := range st.Releases {
		if r.Name == name {
			return r, true
		}
	}
	return Release{}, false
}

// pin is where a component's version lives: its variable in hack/versions.env, or else the
// appVersion of its first chart.
func (st *State) pin(c Component) scalar {
	if c.VersionVar != "" {
		return st.Vars[c.VersionVar]
	}
	return st.Charts[c.Charts[0]].AppVersion
}

// Version returns a component's version: its hack/versions.env variable, or else the appVersion
// of its first chart.
func (st *State) Version(c Component) string { return st.pin(c).value }

// PinnedVersion returns the tag of a pinned image: its hack/versions.env variable.
func (st *State) PinnedVersion(img PinnedImage) string { return st.Vars[img.VersionVar].value }
