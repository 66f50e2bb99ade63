package pins

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root, found from this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// copyPins copies the files holding pins into a temporary repository root.
func copyPins(t *testing.T) string {
	t.Helper()
	src, dst := repoRoot(t), t.TempDir()
	files := []string{HelmfilePath, KindEnvPath}
	for _, c := range Components {
		for _, ch := range c.Charts {
			files = append(files, filepath.Join("charts", ch, "Chart.yaml"))
		}
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
	return refs
}

func TestRepositoryPinsAgree(t *testing.T) {
	st, err := Load(repoRoot(t))
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
				replaceIn(t, root, HelmfilePath, "name: tatara-wrapper", "version: 0.1.0", "version: 0.1.9")
			},
			want: []string{"helmfile/helmfile.yaml:", "release tatara-wrapper pins chart version \"0.1.9\"", "charts/tatara-wrapper/Chart.yaml"},
		},
		{
			name: "helmfile image tag",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-cli", "tag: 0.1.0", "tag: 0.2.0")
			},
			want: []string{"release tatara-cli pins image.tag \"0.2.0\""},
		},
		{
			name: "appVersion without version",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, "charts/tatara-operator/Chart.yaml", "appVersion: ", "0.1.0", "0.3.0")
			},
			want: []string{"chart tatara-operator has version \"0.1.0\" but appVersion \"0.3.0\""},
		},
		{
			name: "project chart left behind",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, "charts/tatara-project/Chart.yaml", "\nversion: ", "0.1.0", "0.0.9")
				replaceIn(t, root, "charts/tatara-project/Chart.yaml", "appVersion: ", "0.1.0", "0.0.9")
			},
			want: []string{"chart tatara-project has appVersion \"0.0.9\" but component operator is at \"0.1.0\"", "release tatara-project pins chart version \"0.1.0\""},
		},
		{
			name: "stand-in agent tag",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, KindEnvPath, "agentImage", ":0.1.0", ":0.0.1")
			},
			want: []string{"helmfile/environments/kind.yaml:", "tatara-agent-standin:0.0.1"},
		},
		{
			name:   "image make images builds",
			images: func(st *State) []string { return []string{"tatara.local/tatara-cli:9.9.9"} },
			want:   []string{"make images builds tatara-cli:9.9.9 but helmfile and charts pin 0.1.0", "make images does not build tatara-operator"},
		},
		{
			name:   "unknown image",
			images: func(st *State) []string { return append(builtImages(st), "tatara.local/tatara-extra:0.1.0") },
			want:   []string{"make images builds tatara-extra, which no component versions"},
		},
		{
			name: "rollout order",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "needs:\n      - tatara-system/tatara-cli", "tatara-system/tatara-cli", "tatara-system/tatara-operator")
			},
			want: []string{"release tatara-wrapper does not need tatara-cli"},
		},
		{
			name: "latest",
			mutate: func(t *testing.T, root string) {
				replaceIn(t, root, HelmfilePath, "name: tatara-operator", "tag: 0.1.0", "tag: latest")
			},
			want: []string{"release tatara-operator pins \"latest\""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyPins(t)
			if tc.mutate != nil {
				tc.mutate(t, root)
			}
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
				if !strings.Contains(err.Error(), w) {
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
		{"wrapper", []string{"charts/tatara-wrapper/Chart.yaml", KindEnvPath, HelmfilePath}},
		{"operator", []string{"charts/tatara-operator/Chart.yaml", "charts/tatara-project/Chart.yaml", HelmfilePath}},
	}
	for _, tc := range tests {
		t.Run(tc.component, func(t *testing.T) {
			root := copyPins(t)
			before := snapshot(t, root)
			c, err := ComponentByName(tc.component)
			if err != nil {
				t.Fatal(err)
			}
			files, err := Bump(root, c, "1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(files, ",") != strings.Join(sorted(tc.changed), ",") {
				t.Errorf("Bump changed %v, want %v", files, sorted(tc.changed))
			}
			st, err := Load(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Check(builtImages(st)); err != nil {
				t.Fatalf("pins disagree after the bump: %v", err)
			}
			for _, other := range Components {
				want := "0.1.0"
				if other.Name == tc.component {
					want = "1.2.3"
				}
				if got := st.Version(other); got != want {
					t.Errorf("component %s is at %q after bumping %s, want %q", other.Name, got, tc.component, want)
				}
			}
			// The diff is only the version strings: same line count, only pin lines differ.
			after := snapshot(t, root)
			for f, old := range before {
				oldLines, newLines := strings.Split(old, "\n"), strings.Split(after[f], "\n")
				if len(oldLines) != len(newLines) {
					t.Fatalf("%s: line count changed", f)
				}
				for i := range oldLines {
					if oldLines[i] != newLines[i] && strings.ReplaceAll(oldLines[i], "0.1.0", "1.2.3") != newLines[i] {
						t.Errorf("%s:%d changed beyond the version: %q -> %q", f, i+1, oldLines[i], newLines[i])
					}
				}
			}
		})
	}
}

func TestBumpRejectsBadInput(t *testing.T) {
	root := copyPins(t)
	c, _ := ComponentByName("cli")
	for _, v := range []string{"latest", "v1.2.3", "1.2", ""} {
		if _, err := Bump(root, c, v); err == nil || !strings.Contains(err.Error(), "invalid version") {
			t.Errorf("Bump(%q) = %v, want an invalid version error", v, err)
		}
	}
	if _, err := ComponentByName("memory"); err == nil || !strings.Contains(err.Error(), `unknown component "memory" (known: cli, wrapper, operator)`) {
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
