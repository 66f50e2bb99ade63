package pins

import (
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"tatara.dev/testkit/testutil"
)

// copyPins copies the files holding pins into a temporary repository root.
func copyPins(t *testing.T) string {
	t.Helper()
	src, dst := testutil.WorkspaceDir(t), t.TempDir()
	files := []string{HelmfilePath, VersionsEnvPath, MonitoringValuesPath}
	for _, c := range Components {
		for _, ch := range c.Charts {
			files = append(files, filepath.Join("charts", ch, "Chart.yaml"))
		}
		files = append(files, c.AgentImageEnvs...)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func builtImages(st *State) []string {
	var refs []string
	for _, c := range Components {
		for _, img := range c.Images {
			refs = append(refs, "tatara.local/"+img+":"+st.Version(c))
		}
	}
	for _, img := range PinnedImages {
		refs = append(refs, "tatara.local/"+img.Name+":"+st.PinnedVersion(img))
	}
	return refs
}

// fakeIntegrity stands in for npm: a well-formed sha512 integrity derived from the package and
// version, so no test reaches the registry.
func fakeIntegrity(pkg, version string) (string, error) {
	sum := sha512.Sum512([]byte(pkg + "@" + version))
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:]), nil
}

// versionOf returns a component's version in the repository under root.
func versionOf(t *testing.T, root, component string) string {
	t.Helper()
	st, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ComponentByName(component)
	if err != nil {
		t.Fatal(err)
	}
	return st.Version(c)
}

// lineOf returns "rel:N", N being the first line of rel under root that starts (after
// indentation) with prefix.
func lineOf(t *testing.T, root, rel, prefix string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return fmt.Sprintf("%s:%d", rel, i+1)
		}
	}
	t.Fatalf("%s has no line starting with %q", rel, prefix)
	return ""
}

func TestRepositoryPinsAgree(t *testing.T) {
	st, err := Load(testutil.WorkspaceDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(builtImages(st)); err != nil {
		t.Fatal(err)
	}
}

// replaceIn rewrites the first occurrence of old after the line containing anchor.
func replaceIn(t *testing.T, root, rel, anchor, old, new string) {
	t.Helper()
	path := filepath.Join(root, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, anchor)
	if i < 0 {
		t.Fatalf("%s has no %q", rel, anchor)
	}
	j := strings.Index(s[i:], old)
	if j < 0 {
		t.Fatalf("%s has no %q after %q", rel, old, anchor)
	}
	s = s[:i+j] + new + s[i+j+len(old):]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckNamesTheMismatch(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, root string)
		images func(st *State) []string
		want   []string
	}{
		{
			name: "helmfile chart version",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-wrapper", "version: "+versionOf(t, root, "wrapper"), "version: 0.0.9")
			},
			want: []string{"helmfile/helmfile.yaml:", "release tatara-wrapper pins chart version \"0.0.9\"", "charts/tatara-wrapper/Chart.yaml"},
		},
		{
			name: "helmfile image tag",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-cli", "tag: "+versionOf(t, root, "cli"), "tag: 9.9.9")
			},
			want: []string{"release tatara-cli pins image.tag \"9.9.9\""},
		},
		{
			name: "appVersion without version",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, "charts/tatara-operator/Chart.yaml", "appVersion: ", versionOf(t, root, "operator"), "9.3.0")
			},
			want: []string{"chart tatara-operator has version \"{operator}\" but appVersion \"9.3.0\""},
		},
		{
			name: "project chart left behind",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, "charts/tatara-project/Chart.yaml", "\nversion: ", versionOf(t, root, "operator"), "0.0.9")
				replaceIn(t, root, "charts/tatara-project/Chart.yaml", "appVersion: ", versionOf(t, root, "operator"), "0.0.9")
			},
			want: []string{"chart tatara-project has appVersion \"0.0.9\" but component operator is at \"{operator}\"", "release tatara-project pins chart version \"{operator}\""},
		},
		// The agent cases name the pins through placeholders, so they hold whatever Claude Code
		// version hack/versions.env pins: {agent} is that version, {versions}, {kind} and
		// {production} the file:line of CLAUDE_CODE_VERSION and of each project.agentImage.
		{
			name: "agent tag in kind.yaml",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, KindEnvPath, "agentImage", ":"+versionOf(t, root, "agent"), ":9.9.9")
			},
			want: []string{"{kind}: project.agentImage pins tatara-agent-claude:9.9.9 but {versions} pins CLAUDE_CODE_VERSION={agent} (component agent)"},
		},
		{
			name: "agent tag in production.yaml",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, ProductionEnvPath, "agentImage", ":"+versionOf(t, root, "agent"), ":2.1.0")
			},
			want: []string{"{production}: project.agentImage pins tatara-agent-claude:2.1.0 but {versions} pins CLAUDE_CODE_VERSION={agent} (component agent)"},
		},
		{
			name: "versions.env moved alone",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, VersionsEnvPath, "\nCLAUDE_CODE_VERSION=", versionOf(t, root, "agent"), "9.9.9")
			},
			want: []string{
				"{kind}: project.agentImage pins tatara-agent-claude:{agent} but {versions} pins CLAUDE_CODE_VERSION=9.9.9",
				"{production}: project.agentImage pins tatara-agent-claude:{agent} but {versions} pins CLAUDE_CODE_VERSION=9.9.9",
			},
		},
		{
			name: "kind still runs the stand-in agent",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, KindEnvPath, "agentImage", "tatara-agent-claude", "tatara-agent-standin")
			},
			want: []string{`{kind}: project.agentImage is "tatara.local/tatara-agent-standin:{agent}", want the tatara-agent-claude image (component agent)`},
		},
		{
			name: "production runs another agent image",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, ProductionEnvPath, "agentImage", "tatara-agent-claude", "claude-code")
			},
			want: []string{`{production}: project.agentImage is "registry.example.com/tatara/claude-code:{agent}", want the tatara-agent-claude image`},
		},
		{
			name: "agent version is not semantic",
			mutate: func(t *testing.T, root string) {
				v := versionOf(t, root, "agent")
				replaceIn(t, root, VersionsEnvPath, "\nCLAUDE_CODE_VERSION=", v, "latest")
				replaceIn(t, root, KindEnvPath, "agentImage", ":"+v, ":latest")
				replaceIn(t, root, ProductionEnvPath, "agentImage", ":"+v, ":latest")
			},
			want: []string{`{versions}: component agent: invalid version "latest"`},
		},
		{
			name: "agent integrity",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, VersionsEnvPath, "CLAUDE_CODE_INTEGRITY_LINUX_ARM64=", "sha512-", "sha1-")
			},
			want: []string{`hack/versions.env:`, `CLAUDE_CODE_INTEGRITY_LINUX_ARM64 is "sha1-`, "want a sha512- integrity (npm view @anthropic-ai/claude-code-linux-arm64@{agent} dist.integrity)"},
		},
		{
			name: "agent image make images builds",
			images: func(st *State) []string {
				refs := builtImages(st)
				for i, ref := range refs {
					if strings.Contains(ref, "/tatara-agent-claude:") {
						refs[i] = "tatara.local/tatara-agent-claude:2.0.0"
					}
				}
				return refs
			},
			want: []string{"make images builds tatara-agent-claude:2.0.0 but {versions} pins CLAUDE_CODE_VERSION={agent} (component agent)"},
		},
		{
			name:   "make images still builds the stand-in agent",
			images: func(st *State) []string { return append(builtImages(st), "tatara.local/tatara-agent-standin:0.1.0") },
			want:   []string{"make images builds tatara-agent-standin, which no component versions"},
		},
		{
			name:   "image make images builds",
			images: func(st *State) []string { return []string{"tatara.local/tatara-cli:9.9.9"} },
			want: []string{
				"make images builds tatara-cli:9.9.9 but helmfile and charts pin {cli}", "make images does not build tatara-operator",
				"make images does not build tatara-model-standin (want tatara-model-standin:{wrapper})", "make images does not build tatara-agent-claude (want tatara-agent-claude:{agent})",
			},
		},
		{
			name:   "unknown image",
			images: func(st *State) []string { return append(builtImages(st), "tatara.local/tatara-extra:0.1.0") },
			want:   []string{"make images builds tatara-extra, which no component versions"},
		},
		{
			name: "rollout order",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "- tatara-system/tatara-cli", "tatara-system/tatara-cli", "tatara-system/tatara-operator")
			},
			want: []string{"release tatara-wrapper does not need tatara-cli"},
		},
		{
			name: "monitoring objects before their CRDs",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-operator", "- monitoring/tatara-e2e-monitoring\n", "")
			},
			want: []string{"release tatara-operator renders monitoring objects but does not need tatara-e2e-monitoring"},
		},
		{
			name: "monitoring stack not first",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "- name: tatara-e2e-monitoring", "tatara-e2e-monitoring", "e2e-stack")
			},
			want: []string{"releases are [e2e-stack tatara-cli tatara-wrapper tatara-operator tatara-project], want the rollout order [tatara-e2e-monitoring tatara-cli"},
		},
		{
			name: "monitoring chart tag",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, MonitoringValuesPath, "configReloaderImage:", "tag: v", "tag: v9.")
			},
			want: []string{MonitoringValuesPath + ":", `operator.configReloaderImage.tag is "v9.`, "but hack/versions.env:", "pins PROMETHEUS_OPERATOR_VERSION=v"},
		},
		{
			name: "monitoring image make images builds",
			images: func(st *State) []string {
				return slices.DeleteFunc(builtImages(st), func(ref string) bool { return strings.Contains(ref, "/prometheus:") })
			},
			want: []string{"make images builds prometheus: but hack/versions.env:", "pins PROMETHEUS_VERSION=v"},
		},
		{
			name: "latest",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-operator", "tag: "+versionOf(t, root, "operator"), "tag: latest")
			},
			want: []string{"release tatara-operator pins \"latest\""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyPins(t)
			agent, operator := versionOf(t, root, "agent"), versionOf(t, root, "operator")
			cli, wrapper := versionOf(t, root, "cli"), versionOf(t, root, "wrapper")
			if tc.mutate != nil {
				tc.mutate(t, root)
			}
			expand := strings.NewReplacer(
				"{agent}", agent,
				"{operator}", operator,
				"{cli}", cli,
				"{wrapper}", wrapper,
				"{versions}", lineOf(t, root, VersionsEnvPath, "CLAUDE_CODE_VERSION="),
				"{kind}", lineOf(t, root, KindEnvPath, "agentImage:"),
				"{production}", lineOf(t, root, ProductionEnvPath, "agentImage:"),
			)
			st, err := Load(root)
			if err != nil {
				t.Fatal(err)
			}
			images := builtImages(st)
			if tc.images != nil {
				images = tc.images(st)
			}
			err = st.Check(images)
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("Check = %v, want ErrMismatch", err)
			}
			for _, w := range tc.want {
				if w = expand.Replace(w); !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestBumpMovesEveryPinOfOneComponent(t *testing.T) {
	tests := []struct {
		component string
		// changed are the files a bump rewrites; every other pin file must stay byte-identical.
		changed []string
	}{
		{"cli", []string{"charts/tatara-cli/Chart.yaml", HelmfilePath}},
		{"wrapper", []string{"charts/tatara-wrapper/Chart.yaml", HelmfilePath}},
		{"operator", []string{"charts/tatara-operator/Chart.yaml", "charts/tatara-project/Chart.yaml", HelmfilePath}},
		{"agent", []string{VersionsEnvPath, KindEnvPath, ProductionEnvPath}},
	}
	for _, tc := range tests {
		t.Run(tc.component, func(t *testing.T) {
			root := copyPins(t)
			before := snapshot(t, root)
			st, err := Load(root)
			if err != nil {
				t.Fatal(err)
			}
			was := map[string]string{}
			for _, c := range Components {
				was[c.Name] = st.Version(c)
			}
			c, err := ComponentByName(tc.component)
			if err != nil {
				t.Fatal(err)
			}
			files, err := BumpWith(root, c, "1.2.3", fakeIntegrity)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(files, ",") != strings.Join(sorted(tc.changed), ",") {
				t.Errorf("Bump changed %v, want %v", files, sorted(tc.changed))
			}
			if st, err = Load(root); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(builtImages(st)); err != nil {
				t.Fatalf("pins disagree after the bump: %v", err)
			}
			for _, other := range Components {
				want := was[other.Name]
				if other.Name == tc.component {
					want = "1.2.3"
				}
				if got := st.Version(other); got != want {
					t.Errorf("component %s is at %q after bumping %s, want %q", other.Name, got, tc.component, want)
				}
			}
			// The diff is only the pins: same line count, only the version strings and the
			// integrities of the new version differ.
			rewrite := func(line string) string {
				for _, in := range c.Integrities {
					if strings.HasPrefix(line, in.Var+"=") {
						sum, _ := fakeIntegrity(in.Package, "1.2.3")
						return in.Var + "=" + sum
					}
				}
				return strings.ReplaceAll(line, was[tc.component], "1.2.3")
			}
			after := snapshot(t, root)
			for f, old := range before {
				oldLines, newLines := strings.Split(old, "\n"), strings.Split(after[f], "\n")
				if len(oldLines) != len(newLines) {
					t.Fatalf("%s: line count changed", f)
				}
				for i := range oldLines {
					if oldLines[i] != newLines[i] && rewrite(oldLines[i]) != newLines[i] {
						t.Errorf("%s:%d changed beyond the version: %q -> %q", f, i+1, oldLines[i], newLines[i])
					}
				}
			}
		})
	}
}

// pinnedImageVars returns the NAME=value lines of the repository's hack/versions.env that pin the
// PinnedImages.
func pinnedImageVars(t *testing.T) string {
	t.Helper()
	vars, err := readEnv(testutil.WorkspaceDir(t), VersionsEnvPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, img := range PinnedImages {
		if line := img.VersionVar + "=" + vars[img.VersionVar].value + "\n"; !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "")
}

// The agent's pins in a fixed layout, with the old version also where Bump must leave it (the
// comments, another variable, a registry with a port, a comment after the reference).
const (
	agentVersionsEnv = `# Pinned versions: plain NAME=value lines.
HELM_VERSION=v3.21.4
# Claude Code 2.1.328 (npm view @anthropic-ai/claude-code-linux-<arch>@<version> dist.integrity).
CLAUDE_CODE_VERSION=2.1.328
CLAUDE_CODE_INTEGRITY_LINUX_X64=sha512-b2xkIHg2NA==
CLAUDE_CODE_INTEGRITY_LINUX_ARM64=sha512-b2xkIGFybTY0==
SOMETHING_ELSE_VERSION=2.1.328
`
	agentKindEnv = `images:
  registry: tatara.local
project:
  # tatara-agent-claude:2.1.328 until the next bump.
  agentImage: tatara.local/tatara-agent-claude:2.1.328
  agentBinaryPath: /usr/local/bin/claude
`
	agentProductionEnv = `project:
  agentImage: "registry.example.com:5000/tatara/tatara-agent-claude:2.1.328" # was tatara-agent-claude:2.1.328
  agentBinaryPath: /usr/local/bin/claude
`
)

func TestBumpAgentRewritesOnlyItsPins(t *testing.T) {
	integrities := map[string]string{
		"@anthropic-ai/claude-code-linux-x64@2.2.0":   "sha512-bmV3IHg2NA==",
		"@anthropic-ai/claude-code-linux-arm64@2.2.0": "sha512-bmV3IGFybTY0",
	}
	answer := func(pkg, version string) (string, error) { return integrities[pkg+"@"+version], nil }
	fail := func(failing, out string, err error) IntegrityLookup {
		return func(pkg, version string) (string, error) {
			if pkg == failing {
				return out, err
			}
			return answer(pkg, version)
		}
	}
	tests := []struct {
		name    string
		version string
		lookup  IntegrityLookup
		// want are the pin files after the bump; nil: the bump fails with wantErr and no file
		// changes.
		want    map[string]string
		wantErr []string
	}{
		{
			name:    "npm answers",
			version: "2.2.0",
			lookup:  answer,
			want: map[string]string{
				VersionsEnvPath: `# Pinned versions: plain NAME=value lines.
HELM_VERSION=v3.21.4
# Claude Code 2.1.328 (npm view @anthropic-ai/claude-code-linux-<arch>@<version> dist.integrity).
CLAUDE_CODE_VERSION=2.2.0
CLAUDE_CODE_INTEGRITY_LINUX_X64=sha512-bmV3IHg2NA==
CLAUDE_CODE_INTEGRITY_LINUX_ARM64=sha512-bmV3IGFybTY0
SOMETHING_ELSE_VERSION=2.1.328
`,
				KindEnvPath: `images:
  registry: tatara.local
project:
  # tatara-agent-claude:2.1.328 until the next bump.
  agentImage: tatara.local/tatara-agent-claude:2.2.0
  agentBinaryPath: /usr/local/bin/claude
`,
				ProductionEnvPath: `project:
  agentImage: "registry.example.com:5000/tatara/tatara-agent-claude:2.2.0" # was tatara-agent-claude:2.1.328
  agentBinaryPath: /usr/local/bin/claude
`,
			},
		},
		{
			name:    "x64 lookup fails",
			version: "2.2.0",
			lookup:  fail("@anthropic-ai/claude-code-linux-x64", "", errors.New("npm view @anthropic-ai/claude-code-linux-x64@2.2.0: E404")),
			wantErr: []string{"failed to bump agent", "@anthropic-ai/claude-code-linux-x64@2.2.0: E404"},
		},
		{
			name:    "arm64 lookup fails after x64 answered",
			version: "2.2.0",
			lookup:  fail("@anthropic-ai/claude-code-linux-arm64", "", errors.New("npm is not installed")),
			wantErr: []string{"failed to bump agent", "npm is not installed"},
		},
		{
			name:    "lookup answers no sha512",
			version: "2.2.0",
			lookup:  fail("@anthropic-ai/claude-code-linux-arm64", "sha1-b2xk", nil),
			wantErr: []string{`the integrity of @anthropic-ai/claude-code-linux-arm64@2.2.0 is "sha1-b2xk", want sha512-`},
		},
		{
			name:    "version that is not semantic",
			version: "stable",
			lookup:  answer,
			wantErr: []string{`invalid version "stable"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyPins(t)
			// The monitoring images' pins are the repository's: the monitoring chart's values
			// (copied by copyPins) must agree with them.
			imageVars := pinnedImageVars(t)
			if v, ok := tc.want[VersionsEnvPath]; ok {
				tc.want[VersionsEnvPath] = v + imageVars
			}
			for rel, data := range map[string]string{VersionsEnvPath: agentVersionsEnv + imageVars, KindEnvPath: agentKindEnv, ProductionEnvPath: agentProductionEnv} {
				if err := os.WriteFile(filepath.Join(root, rel), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, root)
			c, err := ComponentByName("agent")
			if err != nil {
				t.Fatal(err)
			}
			files, err := BumpWith(root, c, tc.version, tc.lookup)
			after := snapshot(t, root)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("Bump = %v, want an error", files)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not mention %q:\n%v", w, err)
					}
				}
				for f := range before {
					if after[f] != before[f] {
						t.Errorf("failed bump changed %s:\n%s", f, after[f])
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{VersionsEnvPath, KindEnvPath, ProductionEnvPath}; strings.Join(files, ",") != strings.Join(sorted(want), ",") {
				t.Errorf("Bump changed %v, want %v", files, sorted(want))
			}
			for f := range before {
				want, ok := tc.want[f]
				if !ok {
					want = before[f]
				}
				if after[f] != want {
					t.Errorf("%s after the bump:\n%s\nwant:\n%s", f, after[f], want)
				}
			}
			st, err := Load(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Check(builtImages(st)); err != nil {
				t.Errorf("pins disagree after the bump: %v", err)
			}
		})
	}
}

// TestNPMIntegrity runs the lookup against a fake npm on PATH: never the registry.
func TestNPMIntegrity(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake npm is a shell script")
	}
	const pkg = "@anthropic-ai/claude-code-linux-x64"
	tests := []struct {
		name string
		// script is the fake npm's body; empty: no npm on PATH.
		script  string
		want    string
		wantErr []string
	}{
		{
			name:    "npm missing",
			wantErr: []string{pkg + "@2.2.0", "npm is not installed"},
		},
		{
			name:    "npm fails",
			script:  "echo 'npm error code E404' >&2; exit 1",
			wantErr: []string{pkg + "@2.2.0", "exit status 1", "npm error code E404"},
		},
		{
			name:    "npm prints nothing",
			script:  "exit 0",
			wantErr: []string{pkg + "@2.2.0", `printed ""`, "want a sha512- integrity"},
		},
		{
			name:    "npm prints another digest",
			script:  "echo sha1-b2xk",
			wantErr: []string{pkg + "@2.2.0", `printed "sha1-b2xk"`},
		},
		{
			name:   "npm answers",
			script: `[ "$*" = "view ` + pkg + `@2.2.0 dist.integrity" ] || { echo "unexpected arguments: $*" >&2; exit 3; }; echo sha512-bmV3IHg2NA==`,
			want:   "sha512-bmV3IHg2NA==",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if tc.script != "" {
				if err := os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil { //nolint:gosec // an executable fake
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin)
			got, err := NPMIntegrity(pkg, "2.2.0")
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("NPMIntegrity = %q, %v, want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("NPMIntegrity = %q, want an error", got)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestBumpRejectsBadInput(t *testing.T) {
	root := copyPins(t)
	for _, name := range []string{"cli", "agent"} {
		c, _ := ComponentByName(name)
		for _, v := range []string{"latest", "v1.2.3", "1.2", ""} {
			if _, err := BumpWith(root, c, v, fakeIntegrity); err == nil || !strings.Contains(err.Error(), "invalid version") {
				t.Errorf("Bump(%s, %q) = %v, want an invalid version error", name, v, err)
			}
		}
	}
	if _, err := ComponentByName("memory"); err == nil || !strings.Contains(err.Error(), `unknown component "memory" (known: cli, wrapper, operator, agent)`) {
		t.Errorf("ComponentByName(memory) = %v", err)
	}
}

func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
