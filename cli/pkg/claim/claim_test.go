package claim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAssignmentFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "assignment.json")
	if _, err := ReadFile(path); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("ReadFile before the claim: got %v, want ErrNotClaimed", err)
	}
	want := Assignment{Project: "p", Task: "t", Kind: "implement", Directive: "do it", RepoDir: "/workspace/r",
		PushBranch: "tatara/t", Ref: "feature", Depth: 1, TimeoutSeconds: 300, AuthorName: "Tatara agent (t)", AuthorEmail: "t@p.tasks.tatara.invalid"}
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("ReadFile: got %+v, want %+v", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("assignment file mode: %v %v, want 0444", fi.Mode(), err)
	}
}

func TestAssignmentValidation(t *testing.T) {
	full := Assignment{Project: "p", Task: "t", Kind: "implement", Directive: "d"}
	for _, tc := range []struct {
		name string
		edit func(*Assignment)
		want string
	}{
		{"no project", func(a *Assignment) { a.Project = "" }, "no project"},
		{"no task", func(a *Assignment) { a.Task = "" }, "no task"},
		{"no kind", func(a *Assignment) { a.Kind = "" }, "no kind"},
		{"no directive", func(a *Assignment) { a.Directive = "" }, "no directive"},
		{"push without repo", func(a *Assignment) { a.PushBranch = "tatara/t" }, "no repo dir"},
		{"ref without push", func(a *Assignment) { a.RepoDir, a.Ref = "/workspace/r", "feature" }, "no push branch"},
		{"ref like an option", func(a *Assignment) {
			a.RepoDir, a.PushBranch, a.Ref, a.TimeoutSeconds = "/workspace/r", "tatara/t", "--upload-pack=x", 1
		}, "starts with '-'"},
		{"negative depth", func(a *Assignment) { a.Depth = -1 }, "negative"},
		{"ref without timeout", func(a *Assignment) { a.RepoDir, a.PushBranch, a.Ref = "/workspace/r", "tatara/t", "feature" }, "no positive timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := full
			tc.edit(&a)
			err := WriteFile(filepath.Join(t.TempDir(), "a.json"), a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteFile: got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestReadFileRefusesMalformedAndOversizedFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"malformed":  "{not json",
		"oversized":  `{"directive":"` + strings.Repeat("x", maxFileBytes) + `"}`,
		"incomplete": `{"project":"p"}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(path); err == nil || errors.Is(err, ErrNotClaimed) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, path)
		}
	}
}
