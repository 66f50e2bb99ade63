// Package pins reads and rewrites the release pins of the repository: a charted component's
// version lives in its charts' Chart.yaml (version == appVersion), in helmfile/helmfile.yaml
// (chart version and image.tag of its releases) and in the image tags `make images` builds; the
// agent's version is the Claude Code version in hack/versions.env (with the npm integrities of
// its native executables), the tag of project.agentImage in the helmfile environments and the
// tag `make images` builds. The images of the e2e monitoring stack are no component's: their tags
// are hack/versions.env pins, which the e2e monitoring chart's values name too. Check proves they
// all agree; Bump moves one component to a new version everywhere at once.
package pins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Component is one versioned unit: its charts and helmfile releases share its version, and so
// do the images built for it.
type Component struct {
	// Name is what `make bump COMPONENT=` takes.
	Name string
	// Charts are directories under charts/ whose Chart.yaml carries the version.
	Charts []string
	// Releases are helmfile release names pinned to the version (chart version; image.tag too
	// when ImageReleases says so).
	Releases []string
	// ImageReleases are the releases that also pin image.tag.
	ImageReleases []string
	// Images are the image names (without registry) make images tags with the version.
	Images []string
	// VersionVar is the hack/versions.env variable that holds the version of a component
	// without charts (Charts is then empty).
	VersionVar string
	// Integrities are hack/versions.env variables that hold the npm registry's dist.integrity
	// of a package at the component's version; Bump looks them up again.
	Integrities []Integrity
	// AgentImageEnvs are helmfile environment files whose project.agentImage is this
	// component's first image, tagged with its version (any registry prefix).
	AgentImageEnvs []string
}

// Integrity is a hack/versions.env variable holding the dist.integrity of an npm package at the
// version of its component.
type Integrity struct {
	Var     string
	Package string
}

// Components lists every component in rollout order (docs/architecture.md); the agent, an image the
// Projects run rather than a helmfile release, comes last.
var Components = []Component{
	{Name: "cli", Charts: []string{"tatara-cli"}, Releases: []string{"tatara-cli"}, ImageReleases: []string{"tatara-cli"}, Images: []string{"tatara-cli"}},
	{Name: "wrapper", Charts: []string{"tatara-wrapper"}, Releases: []string{"tatara-wrapper"}, ImageReleases: []string{"tatara-wrapper"}, Images: []string{"tatara-wrapper", "tatara-model-standin", "tatara-git-server"}},
	{Name: "operator", Charts: []string{"tatara-operator", "tatara-project"}, Releases: []string{"tatara-operator", "tatara-project"}, ImageReleases: []string{"tatara-operator"}, Images: []string{"tatara-operator"}},
	{
		Name: "agent", Images: []string{"tatara-agent-claude"}, VersionVar: "CLAUDE_CODE_VERSION",
		Integrities: []Integrity{
			{Var: "CLAUDE_CODE_INTEGRITY_LINUX_X64", Package: "@anthropic-ai/claude-code-linux-x64"},
			{Var: "CLAUDE_CODE_INTEGRITY_LINUX_ARM64", Package: "@anthropic-ai/claude-code-linux-arm64"},
		},
		AgentImageEnvs: []string{KindEnvPath, ProductionEnvPath},
	},
}

// RolloutOrder is the order releases must appear in helmfile.yaml, each needing the one before.
var RolloutOrder = []string{"tatara-cli", "tatara-wrapper", "tatara-operator", "tatara-project"}

// MonitoringRelease is the e2e monitoring stack (prometheus-operator and its CRDs; kind environment
// only): first in helmfile.yaml, needed by every release that renders monitoring objects.
const MonitoringRelease = "tatara-e2e-monitoring"

// MonitoringReleases are the releases whose charts render PodMonitors, ServiceMonitors or
// PrometheusRules.
var MonitoringReleases = []string{"tatara-cli", "tatara-wrapper", "tatara-operator"}

// PinnedImage is an image make images builds at a hack/versions.env pin rather than at a
// component's version; the e2e monitoring chart's values name the same tag at ValuesTag.
type PinnedImage struct {
	Name       string
	VersionVar string
	ValuesTag  []string
}

// PinnedImages are the images of the e2e monitoring stack.
var PinnedImages = []PinnedImage{
	{Name: "prometheus-operator", VersionVar: "PROMETHEUS_OPERATOR_VERSION", ValuesTag: []string{"operator", "image", "tag"}},
	{Name: "prometheus-config-reloader", VersionVar: "PROMETHEUS_OPERATOR_VERSION", ValuesTag: []string{"operator", "configReloaderImage", "tag"}},
	{Name: "prometheus", VersionVar: "PROMETHEUS_VERSION", ValuesTag: []string{"prometheus", "image", "tag"}},
}

// Paths relative to the repository root.
const (
	HelmfilePath      = "helmfile/helmfile.yaml"
	KindEnvPath       = "helmfile/environments/kind.yaml"
	ProductionEnvPath = "helmfile/environments/production.yaml"
	// VersionsEnvPath holds the pinned tool versions as plain NAME=value lines.
	VersionsEnvPath = "hack/versions.env"
	// MonitoringValuesPath is the values of the e2e monitoring chart, which name the PinnedImages.
	MonitoringValuesPath = "e2e/charts/monitoring/values.yaml"
)

var (
	semver    = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	integrity = regexp.MustCompile(`^sha512-[A-Za-z0-9+/]+={0,2}$`)
)

// ErrMismatch is wrapped by every disagreement Check finds.
var ErrMismatch = errors.New("pins disagree")

// ComponentByName returns the component called name.
func ComponentByName(name string) (Component, error) {
	names := make([]string, 0, len(Components))
	for _, c := range Components {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	return Component{}, fmt.Errorf("unknown component %q (known: %s)", name, strings.Join(names, ", "))
}

// ValidateVersion rejects anything but a semantic version x.y.z[-pre]; "latest" in particular.
func ValidateVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("invalid version %q: want x.y.z (semantic version, no leading v, never latest)", v)
	}
	return nil
}

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

// Check returns every disagreement between the pins, and between the pins and images, the
// references `make images` builds (name:tag, registry prefix allowed). Each problem names the
// file, line and both values; the error wraps ErrMismatch.
func (st *State) Check(images []string) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	built := map[string][]string{}
	for _, ref := range images {
		name, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
		if !ok {
			add("make images builds %q without a tag", ref)
			continue
		}
		built[name] = append(built[name], tag)
	}

	for _, c := range Components {
		want, pin := st.Version(c), st.pin(c)
		// pinned says where the version comes from, for the messages about the other pins.
		pinned := fmt.Sprintf("helmfile and charts pin %s", want)
		if c.VersionVar != "" {
			pinned = fmt.Sprintf("%s pins %s=%s", pin, c.VersionVar, want)
		}
		if err := ValidateVersion(want); err != nil {
			add("%s: component %s: %v", pin, c.Name, err)
		}
		for _, name := range c.Charts {
			ch := st.Charts[name]
			if ch.Version.value != ch.AppVersion.value {
				add("%s: chart %s has version %q but appVersion %q (they move together)", ch.Version, name, ch.Version.value, ch.AppVersion.value)
			}
			if ch.AppVersion.value != want {
				add("%s: chart %s has appVersion %q but component %s is at %q (%s)", ch.AppVersion, name, ch.AppVersion.value, c.Name, want, pin)
			}
		}
		for i, rname := range c.Releases {
			r, ok := st.release(rname)
			if !ok {
				add("%s: no release %q", HelmfilePath, rname)
				continue
			}
			chart := st.Charts[c.Charts[i]]
			if r.Version.value == "" {
				add("%s: release %s pins no chart version", HelmfilePath, rname)
			} else if r.Version.value != chart.Version.value {
				add("%s: release %s pins chart version %q but %s has version %q", r.Version, rname, r.Version.value, chart.Version, chart.Version.value)
			}
		}
		for _, rname := range c.ImageReleases {
			r, ok := st.release(rname)
			if !ok {
				continue
			}
			switch {
			case !r.HasTag:
				add("%s: release %s pins no image.tag", HelmfilePath, rname)
			case r.ImageTag.value != want:
				add("%s: release %s pins image.tag %q but %s has appVersion %q", r.ImageTag, rname, r.ImageTag.value, pin, want)
			}
		}
		for _, in := range c.Integrities {
			v, ok := st.Vars[in.Var]
			switch {
			case !ok:
				add("%s: no %s (npm view %s@%s dist.integrity; make bump COMPONENT=%s sets it)", VersionsEnvPath, in.Var, in.Package, want, c.Name)
			case !integrity.MatchString(v.value):
				add("%s: %s is %q, want a sha512- integrity (npm view %s@%s dist.integrity)", v, in.Var, v.value, in.Package, want)
			}
		}
		for _, env := range c.AgentImageEnvs {
			ai, ok := st.AgentImages[env]
			if !ok {
				add("%s: no project.agentImage (component %s)", env, c.Name)
				continue
			}
			if ai.Name != c.Images[0] {
				add("%s: project.agentImage is %q, want the %s image (component %s)", ai.Tag, ai.Ref, c.Images[0], c.Name)
			}
			if ai.Tag.value != want {
				add("%s: project.agentImage pins %s:%s but %s (component %s)", ai.Tag, ai.Name, ai.Tag.value, pinned, c.Name)
			}
		}
		if images != nil {
			for _, img := range c.Images {
				tags := built[img]
				switch {
				case len(tags) == 0:
					add("make images does not build %s (want %s:%s)", img, img, want)
				case len(tags) != 1 || tags[0] != want:
					add("make images builds %s:%s but %s (component %s)", img, strings.Join(tags, ","), pinned, c.Name)
				}
			}
		}
	}
	for _, img := range PinnedImages {
		want := st.Vars[img.VersionVar]
		if tag := st.PinnedTags[img.Name]; tag.value != want.value {
			add("%s: %s is %q but %s pins %s=%s", tag, strings.Join(img.ValuesTag, "."), tag.value, want, img.VersionVar, want.value)
		}
		if tags := built[img.Name]; images != nil && (len(tags) != 1 || tags[0] != want.value) {
			add("make images builds %s:%s but %s pins %s=%s", img.Name, strings.Join(tags, ","), want, img.VersionVar, want.value)
		}
	}
	if images != nil {
		known := map[string]bool{}
		for _, c := range Components {
			for _, img := range c.Images {
				known[img] = true
			}
		}
		for _, img := range PinnedImages {
			known[img.Name] = true
		}
		for img := range built {
			if !known[img] {
				add("make images builds %s, which no component versions", img)
			}
		}
	}

	// Rollout order: exactly these releases, in this order, after the monitoring stack, each
	// needing the previous one; and the monitoring objects need the monitoring stack's CRDs.
	var names []string
	for _, r := range st.Releases {
		names = append(names, r.Name)
	}
	order := append([]string{MonitoringRelease}, RolloutOrder...)
	needs := func(r Release, name string) bool {
		return slices.ContainsFunc(r.Needs, func(n string) bool { return n == name || strings.HasSuffix(n, "/"+name) })
	}
	if !slices.Equal(names, order) {
		add("%s: releases are [%s], want the rollout order [%s]", HelmfilePath, strings.Join(names, " "), strings.Join(order, " "))
	} else {
		for i := 2; i < len(st.Releases); i++ {
			if prev := order[i-1]; !needs(st.Releases[i], prev) {
				add("%s: release %s does not need %s (rollout order)", HelmfilePath, st.Releases[i].Name, prev)
			}
		}
		for _, name := range MonitoringReleases {
			if r, _ := st.release(name); !needs(r, MonitoringRelease) {
				add("%s: release %s renders monitoring objects but does not need %s (their CRDs)", HelmfilePath, name, MonitoringRelease)
			}
		}
	}
	for _, r := range st.Releases {
		if r.ImageTag.value == "latest" || r.Version.value == "latest" {
			add("%s: release %s pins \"latest\"", r.ImageTag, r.Name)
		}
	}

	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("%w:\n  %s", ErrMismatch, strings.Join(problems, "\n  "))
}

// IntegrityLookup returns the npm registry's dist.integrity of package pkg at version.
type IntegrityLookup func(pkg, version string) (string, error)

// npmTimeout bounds one `npm view`.
const npmTimeout = 2 * time.Minute

// NPMIntegrity asks npm for the dist.integrity of pkg@version (`npm view pkg@version
// dist.integrity`), the sha512 the agent image build verifies the download against.
func NPMIntegrity(pkg, version string) (string, error) {
	spec := pkg + "@" + version
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm is not installed (it asks the npm registry): %w", spec, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "view", spec, "dist.integrity")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm view %s dist.integrity: %w: %s", spec, spec, err, strings.TrimSpace(stderr.String()))
	}
	out := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(out, "sha512-") {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm view %s dist.integrity printed %q, want a sha512- integrity (does version %s exist?)", spec, spec, out, version)
	}
	return out, nil
}

// edit is one in-place replacement of a scalar's text.
type edit struct {
	s   scalar
	old string
	new string
}

// Bump moves component c to version everywhere and returns the files it changed; integrities
// come from npm (NPMIntegrity). See BumpWith.
func Bump(root string, c Component, version string) ([]string, error) {
	return BumpWith(root, c, version, NPMIntegrity)
}

// BumpWith moves component c to version everywhere and returns the files it changed, looking up
// the component's integrities with lookup. It rewrites only the scalars' text, so comments and
// layout stay as they are and the diff of the release MR is exactly the pins. Every lookup and
// edit is done before the first file is written: a failure leaves the files untouched.
func BumpWith(root string, c Component, version string, lookup IntegrityLookup) ([]string, error) {
	if err := ValidateVersion(version); err != nil {
		return nil, err
	}
	st, err := Load(root)
	if err != nil {
		return nil, err
	}
	var edits []edit
	for _, name := range c.Charts {
		ch := st.Charts[name]
		edits = append(edits, edit{ch.Version, ch.Version.value, version}, edit{ch.AppVersion, ch.AppVersion.value, version})
	}
	for _, rname := range c.Releases {
		r, ok := st.release(rname)
		if !ok {
			return nil, fmt.Errorf("failed to bump %s: %s has no release %q", c.Name, HelmfilePath, rname)
		}
		edits = append(edits, edit{r.Version, r.Version.value, version})
	}
	for _, rname := range c.ImageReleases {
		r, _ := st.release(rname)
		if !r.HasTag {
			return nil, fmt.Errorf("failed to bump %s: release %q in %s pins no image.tag", c.Name, rname, HelmfilePath)
		}
		edits = append(edits, edit{r.ImageTag, r.ImageTag.value, version})
	}
	if c.VersionVar != "" {
		v := st.Vars[c.VersionVar]
		edits = append(edits, edit{v, v.value, version})
	}
	for _, in := range c.Integrities {
		v, ok := st.Vars[in.Var]
		if !ok {
			return nil, fmt.Errorf("failed to bump %s: %s has no %s", c.Name, VersionsEnvPath, in.Var)
		}
		sum, err := lookup(in.Package, version)
		if err != nil {
			return nil, fmt.Errorf("failed to bump %s: %w", c.Name, err)
		}
		if !integrity.MatchString(sum) {
			return nil, fmt.Errorf("failed to bump %s: the integrity of %s@%s is %q, want sha512-<base64>", c.Name, in.Package, version, sum)
		}
		edits = append(edits, edit{v, v.value, sum})
	}
	for _, env := range c.AgentImageEnvs {
		ai := st.AgentImages[env]
		edits = append(edits, edit{ai.Tag, ":" + ai.Tag.value, ":" + version})
	}

	byFile := map[string][]edit{}
	for _, e := range edits {
		byFile[e.s.file] = append(byFile[e.s.file], e)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	contents := make([][]byte, len(files))
	for i, f := range files {
		if contents[i], err = applyEdits(root, f, byFile[f]); err != nil {
			return nil, err
		}
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(root, f), contents[i], 0o644); err != nil { //nolint:gosec // a tracked text file
			return nil, fmt.Errorf("failed to write %q: %w", f, err)
		}
	}
	return files, nil
}

// applyEdits returns the file with, on each edit's line, the first occurrence of the old text at
// or after the scalar's column replaced (quotes, if any, are kept because only the inner text
// changes).
func applyEdits(root, rel string, edits []edit) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, fmt.Errorf("failed to read %q: %w", rel, err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for _, e := range edits {
		if e.s.line < 1 || e.s.line > len(lines) {
			return nil, fmt.Errorf("failed to edit %s: line out of range", e.s)
		}
		line := string(lines[e.s.line-1])
		start := e.s.col - 1
		if start < 0 || start > len(line) {
			return nil, fmt.Errorf("failed to edit %s: column out of range", e.s)
		}
		idx := strings.Index(line[start:], e.old)
		if idx < 0 {
			return nil, fmt.Errorf("failed to edit %s: %q not found on the line", e.s, e.old)
		}
		idx += start
		lines[e.s.line-1] = []byte(line[:idx] + e.new + line[idx+len(e.old):])
	}
	return bytes.Join(lines, nil), nil
}
