package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, want, got string
		contains        []string
		absent          []string
	}{
		{"changed line", "a\nb\nc\nd\n", "a\nb\nX\nd\n", []string{"@@ line 3 @@", "- c", "+ X", "  b", "  d"}, []string{"- d"}},
		{"added line", "a\nb\n", "a\nb\nc\n", []string{"+ c"}, []string{"- "}},
		{"long output is cut", strings.Repeat("x\n", 200), strings.Repeat("y\n", 200), []string{"more lines"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Diff(tt.want, tt.got)
			for _, s := range tt.contains {
				if !strings.Contains(d, s) {
					t.Errorf("diff lacks %q:\n%s", s, d)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(d, s) {
					t.Errorf("diff has %q:\n%s", s, d)
				}
			}
			if n := strings.Count(d, "\n"); n > MaxDiffLines+2 {
				t.Errorf("diff has %d lines, over the bound", n)
			}
		})
	}
}

// recorder captures Errorf so Check's failure can be asserted.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) { r.errs = append(r.errs, format) }
func (r *recorder) Helper()                           {}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.golden")
	t.Setenv(EnvUpdate, "1")
	Check(t, path, []byte("one\n"))
	if raw, err := os.ReadFile(path); err != nil || string(raw) != "one\n" {
		t.Fatalf("update wrote %q, %v", raw, err)
	}
	t.Setenv(EnvUpdate, "")
	r := &recorder{TB: t}
	Check(r, path, []byte("one\n"))
	if len(r.errs) != 0 {
		t.Fatalf("equal content failed: %v", r.errs)
	}
	Check(r, path, []byte("two\n"))
	if len(r.errs) != 1 {
		t.Fatalf("different content: %d errors, want 1", len(r.errs))
	}
}

func TestCheckSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	const doc = "intro\n<!-- b -->\nold\n<!-- e -->\noutro\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	CheckSection(r, path, "<!-- b -->\n", "<!-- e -->", "old\n")
	if len(r.errs) != 0 {
		t.Fatalf("equal section failed: %v", r.errs)
	}
	CheckSection(r, path, "<!-- b -->\n", "<!-- e -->", "new\n")
	if len(r.errs) != 1 {
		t.Fatalf("different section: %d errors, want 1", len(r.errs))
	}
	CheckSection(r, path, "<!-- missing -->", "<!-- e -->", "new\n")
	if len(r.errs) != 2 {
		t.Fatalf("missing marker: %d errors, want 2", len(r.errs))
	}
	t.Setenv(EnvUpdate, "1")
	CheckSection(t, path, "<!-- b -->\n", "<!-- e -->", "new\n")
	if raw, err := os.ReadFile(path); err != nil || string(raw) != "intro\n<!-- b -->\nnew\n<!-- e -->\noutro\n" {
		t.Fatalf("update wrote %q, %v", raw, err)
	}
}
