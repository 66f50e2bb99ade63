package envtestassets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	full := t.TempDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(full, bin), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	noExec := t.TempDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(noExec, bin), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		dir     string
		wantErr string
	}{
		{"both binaries", full, ""},
		{"empty dir names the binary and the fix", t.TempDir(), "kube-apiserver is missing"},
		{"not executable", noExec, "kube-apiserver is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBEBUILDER_ASSETS", tt.dir)
			got, err := Dir()
			if tt.wantErr == "" {
				if err != nil || got != tt.dir {
					t.Fatalf("Dir() = %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "make envtest-assets") {
				t.Fatalf("error %v, want it to contain %q and the make target", err, tt.wantErr)
			}
		})
	}
}

func TestDirDefaultsToTheVersionedCache(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("K8S_VERSION", "")
	cache := t.TempDir()
	t.Setenv("TATARA_CACHE", cache)
	_, err := Dir()
	if err == nil {
		t.Fatal("an empty cache must be an error")
	}
	root, rerr := repoRoot()
	if rerr != nil {
		t.Fatal(rerr)
	}
	version, verr := pinned(filepath.Join(root, "hack", "versions.env"), "KUBERNETES_VERSION")
	if verr != nil || !strings.HasPrefix(version, "v1.") {
		t.Fatalf("pinned KUBERNETES_VERSION %q, %v", version, verr)
	}
	if want := filepath.Join(cache, "k8s", version, "bin"); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v should name %s", err, want)
	}
}

// TestDirFollowsK8SVersion: K8S_VERSION (make's variable) picks another version's cache.
func TestDirFollowsK8SVersion(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("K8S_VERSION", "v1.34.4")
	cache := t.TempDir()
	t.Setenv("TATARA_CACHE", cache)
	_, err := Dir()
	if want := filepath.Join(cache, "k8s", "v1.34.4", "bin"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v should name %s", err, want)
	}
}
