package install

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "wrapper")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name, dst, wantErr string
	}{
		{"into the shared volume", filepath.Join(dir, "wrapper"), ""},
		{"over an earlier copy", filepath.Join(dir, "wrapper"), ""},
		{"relative path", "wrapper", "must be absolute"},
		{"missing directory", filepath.Join(dir, "none", "wrapper"), "failed to install into"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Copy(src, tt.dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Copy = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(tt.dst)
			if err != nil || string(got) != "#!/bin/sh\necho hi\n" {
				t.Fatalf("copy = %q (%v)", got, err)
			}
			if fi, _ := os.Stat(tt.dst); fi.Mode().Perm() != 0o555 {
				t.Errorf("mode %v, want 0555", fi.Mode().Perm())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d entries, want the copy alone (no temporary left)", len(entries))
			}
		})
	}
}

func TestMainInstallsThisExecutable(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main(nil, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), "usage: wrapper install DEST") {
		t.Fatalf("Main() = %d, %s", code, stderr.String())
	}
	dst := filepath.Join(t.TempDir(), "wrapper")
	stderr.Reset()
	if code := Main([]string{dst}, &stderr); code != 0 {
		t.Fatalf("Main(%s) = %d, %s", dst, code, stderr.String())
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs from this executable (%v)", err)
	}
}
