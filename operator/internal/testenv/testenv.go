// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with the
// operator's CRDs, for the integration tests and the benchmark. The binaries are found by
// tatara.dev/testkit/envtestassets: never downloaded, and a missing binary is an error, not a skip.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/operator/internal/manager"
	"tatara.dev/testkit/envtestassets"
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

// AssetsDir returns the directory holding kube-apiserver and etcd (testkit/envtestassets, shared
// with the chart tests).
func AssetsDir() (string, error) { return envtestassets.Dir() }

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
