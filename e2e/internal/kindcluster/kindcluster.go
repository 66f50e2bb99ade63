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

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"
)

// New picks a cluster name starting with prefix, points kind at a docker network of that name
// (KIND_EXPERIMENTAL_DOCKER_NETWORK, for this process), and returns the options that create the
// cluster with the repository's kind wrapper under root.
func New(root, prefix string) (string, []support.ClusterOpts, error) {
	// Short: the node's name (<cluster>-control-plane) becomes a pod's hostname (63 characters).
	name := envconf.RandomName(prefix, 16)
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
