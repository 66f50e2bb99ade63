// Package envtestassets finds the kube-apiserver and etcd every envtest of this repository runs
// (the operator's integration tests, the chart tests): KUBEBUILDER_ASSETS, the upstream variable,
// else the project cache that `make envtest-assets` fills for the Kubernetes version pinned in
// hack/versions.env (K8S_VERSION overrides it, as for make). Nothing is downloaded, and a missing
// binary is an error that says how to build it, never a skip.
package envtestassets

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dir returns the directory holding kube-apiserver and etcd.
func Dir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var err error
		if dir, err = cacheDir(); err != nil {
			return "", err
		}
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(dir, bin))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("envtest binary %s is missing from %q: build it with `make envtest-assets` "+
				"(hack/k8s-binaries.sh kube-apiserver etcd) or point KUBEBUILDER_ASSETS at a directory holding kube-apiserver and etcd", bin, dir)
		}
	}
	return dir, nil
}

// cacheDir is $TATARA_CACHE (default ~/.cache/tatara)/k8s/<version>/bin.
func cacheDir() (string, error) {
	version := os.Getenv("K8S_VERSION")
	if version == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		if version, err = pinned(filepath.Join(root, "hack", "versions.env"), "KUBERNETES_VERSION"); err != nil {
			return "", err
		}
	}
	cache := os.Getenv("TATARA_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("failed to find the home directory for the binary cache: %w", err)
		}
		cache = filepath.Join(home, ".cache", "tatara")
	}
	return filepath.Join(cache, "k8s", version, "bin"), nil
}

// repoRoot walks up from the working directory to the directory holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("failed to find the repository root (go.work) above the working directory")
		}
		dir = parent
	}
}

// pinned reads NAME=value from a versions file.
func pinned(path, name string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("failed to open %q: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), name+"="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("failed to find %s in %q", name, path)
}
