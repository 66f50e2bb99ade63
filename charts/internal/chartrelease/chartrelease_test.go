package chartrelease

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chartFiles returns, for a chart directory dir, a function that writes a file into it and one
// that digests it.
func chartFiles(t *testing.T, dir string) (write func(path, content string), digest func() string) {
	write = func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest = func() string {
		t.Helper()
		d, err := Digest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return write, digest
}

func TestDigestSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	write, digest := chartFiles(t, dir)
	write("Chart.yaml", "version: 0.1.0\n")
	write("templates/a.yaml", "a: 1\n")
	seen := map[string]string{digest(): "start"}
	for _, step := range []struct{ name, path, content string }{
		{"a template's content", "templates/a.yaml", "a: 2\n"},
		{"a new file", "templates/b.yaml", ""},
		{"a file moved", "templates/c/b.yaml", ""},
	} {
		write(step.path, step.content)
		if step.name == "a file moved" {
			if err := os.Remove(filepath.Join(dir, "templates/b.yaml")); err != nil {
				t.Fatal(err)
			}
		}
		d := digest()
		if prev, ok := seen[d]; ok {
			t.Errorf("%s left the digest as it was after %s", step.name, prev)
		}
		seen[d] = step.name
	}
	again, err := Digest(dir)
	if err != nil || again != digest() {
		t.Errorf("the digest of unchanged files changed (%v)", err)
	}
}

func TestCheck(t *testing.T) {
	r := Record{"c": {"0.1.0": "sha256:aa", "0.2.0": "sha256:bb"}}
	for _, tt := range []struct {
		name, version, digest string
		want                  string // "" = no problem
		recordable            bool
	}{
		{"released and unchanged", "0.2.0", "sha256:bb", "", false},
		{"released and changed", "0.2.0", "sha256:cc", "its files changed since version 0.2.0 was released", false},
		{"a new version", "0.2.1", "sha256:cc", "is not recorded", true},
		{"an older version than released", "0.1.5", "sha256:cc", "is not newer than the released [0.2.0]", false},
		{"not semver", "v1", "sha256:cc", "not semver", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := r.Check("c", tt.version, tt.digest)
			switch {
			case tt.want == "" && p != nil:
				t.Fatalf("Check = %v, want none", p)
			case tt.want != "" && (p == nil || !strings.Contains(p.Error(), tt.want) || p.Recordable != tt.recordable):
				t.Fatalf("Check = %+v, want %q (recordable %v)", p, tt.want, tt.recordable)
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := Load(root); err != nil || len(r) != 0 {
		t.Fatalf("Load of no record = %v, %v", r, err)
	}
	r := Record{"c": {"0.1.0": "sha256:aa"}}
	if err := r.Save(root); err != nil {
		t.Fatal(err)
	}
	got, err := Load(root)
	if err != nil || got["c"]["0.1.0"] != "sha256:aa" {
		t.Fatalf("Load = %v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(root, RecordFile), []byte("c: [1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(root); err == nil || !strings.Contains(err.Error(), "chart -> version -> digest") {
		t.Fatalf("Load of a malformed record = %v", err)
	}
}

// TestDigestLeavesOutBuiltDependencies: what `helm dependency build` writes into charts/ is not the
// chart's content (it changes with every build), but a chart's Chart.lock is, and a templates/charts
// directory deeper down is an ordinary folder.
func TestDigestLeavesOutBuiltDependencies(t *testing.T) {
	dir := t.TempDir()
	write, digest := chartFiles(t, dir)
	write("Chart.yaml", "version: 0.1.0\n")
	before := digest()
	write("charts/tatara-common-0.1.0.tgz", "built at one time")
	if got := digest(); got != before {
		t.Error("a built dependency under charts/ changed the digest")
	}
	write("charts/tatara-common-0.1.0.tgz", "built at another time")
	if got := digest(); got != before {
		t.Error("rebuilding a dependency changed the digest")
	}
	for _, p := range []string{"Chart.lock", "templates/charts/a.yaml"} {
		write(p, "x")
		if got := digest(); got == before {
			t.Errorf("%s did not change the digest", p)
		}
		before = digest()
	}
}
