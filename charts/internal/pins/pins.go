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
	"errors"
	"fmt"
	"regexp"
	"strings"
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
