// Package kindcluster is how the e2e suite and `make kind-smoke` get a kind cluster of their own:
// a random short name, a docker network of the same name (kind leaves its network behind, so each
// run gets one it can remove), the repository's kind wrapper (hack/kind.sh) and the node image
// KIND_NODE_IMAGE names, else kind's default.
package kindcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"
)

// KeepEnv set to 1 keeps the cluster after the run, under a fixed name (<prefix>-kept), so that
// the next run with it set finds the cluster and reuses it.
const KeepEnv = "E2E_KEEP_CLUSTER"

// Keep reports whether KeepEnv asks to keep (and reuse) the cluster.
func Keep() bool { return os.Getenv(KeepEnv) == "1" }

// New picks a cluster name starting with prefix (random, or <prefix>-kept when Keep), points kind
// at a docker network of that name (KIND_EXPERIMENTAL_DOCKER_NETWORK, for this process), and
// returns the options that create the cluster with the repository's kind wrapper under root. A
// cluster of that name that exists already is reused by the create.
func New(root, prefix string) (string, []support.ClusterOpts, error) {
	// Short: the node's name (<cluster>-control-plane) becomes a pod's hostname (63 characters).
	name := envconf.RandomName(prefix, 16)
	if Keep() {
		name = prefix + "-kept"
	}
	if err := os.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", name); err != nil {
		return "", nil, err
	}
	opts := []support.ClusterOpts{kind.WithPath(filepath.Join(root, "hack", "kind.sh"))}
	if img := NodeImage(); img != "" {
		opts = append(opts, kind.WithImage(img))
	}
	return name, opts, nil
}

// NodeImage is the node image the cluster is created from: KIND_NODE_IMAGE, or "" for kind's
// default.
func NodeImage() string { return os.Getenv("KIND_NODE_IMAGE") }

// RemoveNetwork removes the cluster's docker network, which kind's delete leaves behind.
func RemoveNetwork(name string) error {
	if out, err := exec.Command("docker", "network", "rm", name).CombinedOutput(); err != nil {
		return fmt.Errorf("failed to remove docker network %s: %w: %s", name, err, out)
	}
	return nil
}

// Exists reports whether kind knows a cluster called name (hack/kind.sh get clusters under root).
func Exists(root, name string) (bool, error) {
	out, err := exec.Command(filepath.Join(root, "hack", "kind.sh"), "get", "clusters").Output()
	if err != nil {
		return false, fmt.Errorf("failed to list kind clusters: %w", err)
	}
	return slices.Contains(strings.Fields(string(out)), name), nil
}
