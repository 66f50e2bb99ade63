// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with the
// operator's CRDs, for the integration tests and the benchmark. The binaries are never
// downloaded: they come from KUBEBUILDER_ASSETS or the project cache that
// hack/k8s-binaries.sh fills, and a missing binary is an error, not a skip.
package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/operator/internal/manager"
)

// moduleRoot walks up from the working directory to the operator module's go.mod, so the
// tests find their files from any package directory or an IDE.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get working directory: %w", err)
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(raw), "module tatara.dev/operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("failed to find the tatara.dev/operator module root above the working directory")
		}
		dir = parent
	}
}

// pinnedVersion reads NAME=value from the repository's hack/versions.env.
func pinnedVersion(root, name string) (string, error) {
	path := filepath.Join(root, "..", "hack", "versions.env")
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

// AssetsDir returns the directory holding kube-apiserver and etcd, or an error that says
// how to build them.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		// K8S_VERSION selects another supported version, as it does for make and hack/.
		version := os.Getenv("K8S_VERSION")
		if version == "" {
			if version, err = pinnedVersion(root, "KUBERNETES_VERSION"); err != nil {
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
		dir = filepath.Join(cache, "k8s", version, "bin")
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

// Start starts the control plane with the CRDs from config/crd/bases.
func Start() (*envtest.Environment, *rest.Config, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, nil, err
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start envtest (kube-apiserver and etcd from %q): %w", assets, err)
	}
	return env, cfg, nil
}
