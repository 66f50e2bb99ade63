package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "wrapper")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, dst, err string
	}{
		{name: "an executable stays executable", src: src, dst: filepath.Join(dir, "copy")},
		{name: "missing source", src: filepath.Join(dir, "nope"), dst: filepath.Join(dir, "x"), err: "failed to open source"},
		{name: "a directory", src: dir, dst: filepath.Join(dir, "y"), err: "not a regular file"},
		{name: "destination in a missing directory", src: src, dst: filepath.Join(dir, "no", "z"), err: "failed to create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := copyFile(tc.src, tc.dst)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("copyFile(%q, %q) = %v, want an error containing %q", tc.src, tc.dst, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755", info.Mode().Perm())
			}
			if b, _ := os.ReadFile(tc.dst); string(b) != "#!/bin/true\n" {
				t.Errorf("content %q", b)
			}
		})
	}
}
