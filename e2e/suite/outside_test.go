//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// The host outside the cluster (e2e/cmd/outside-host): a container beside the kind node, on a
// docker network of its own whose addresses are public ones (TEST-NET-2, RFC 5737), so that
// neither the agents' NetworkPolicy nor the egress proxy treat it as part of the cluster. The
// cluster DNS names it twice: allowedHost, on the kind Project's egress allow-list (helmfile's
// kind environment), and blockedHost, on no list.
const (
	outsideSubnet  = "198.51.100.0/24"
	outsideIP      = "198.51.100.10"
	outsideZone    = "egress.test"
	allowedHost    = "allowed." + outsideZone
	blockedHost    = "blocked." + outsideZone
	outsideControl = "http://" + outsideIP + ":8081"
)

// outsideName is the outside host's container and docker network: the run's cluster name plus a
// suffix, so that tearDown finds them.
func outsideName() string { return clusterName + "-outside" }

// startOutsideHost starts the outside host from the model stand-in's image, connects the kind
// node to its network (the node routes the pods' traffic there), and adds the zone to CoreDNS,
// restarting it and waiting until the new pods serve.
func startOutsideHost(images []string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		i := slices.IndexFunc(images, func(img string) bool { return strings.Contains(img, "/tatara-model-standin:") })
		if i < 0 {
			return ctx, fmt.Errorf("E2E_IMAGES has no tatara-model-standin image (it holds outside-host): %v", images)
		}
		name := outsideName()
		removeOutsideHost()
		for _, args := range [][]string{
			{"network", "create", "--subnet", outsideSubnet, name},
			{"run", "-d", "--name", name, "--network", name, "--ip", outsideIP,
				// The image runs as UID 65532; binding 80 and 443 needs no capability then.
				"--sysctl", "net.ipv4.ip_unprivileged_port_start=0",
				"--entrypoint", "/usr/local/bin/outside-host", images[i], "--names", allowedHost + "," + blockedHost},
			{"network", "connect", name, clusterName + "-control-plane"},
		} {
			if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
				return ctx, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
			}
		}
		if err := waitOutsideHost(ctx); err != nil {
			return ctx, err
		}
		return ctx, addOutsideZone(ctx, cfg)
	}
}

// removeOutsideHost removes the outside host's container and network, if any.
func removeOutsideHost() {
	name := outsideName()
	_ = exec.Command("docker", "rm", "-f", name).Run()
	_ = exec.Command("docker", "network", "disconnect", "-f", name, clusterName+"-control-plane").Run()
	if out, err := exec.Command("docker", "network", "rm", name).CombinedOutput(); err != nil && !strings.Contains(string(out), "not found") {
		logf("failed to remove docker network %s: %v: %s", name, err, out)
	}
}

// waitOutsideHost waits until the outside host answers the suite.
func waitOutsideHost(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return wait.For(func(ctx context.Context) (bool, error) {
		resp, err := client.Get(outsideControl + "/seen") //nolint:noctx // the suite's own container
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}, wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(500*time.Millisecond))
}

// addOutsideZone gives CoreDNS a server block for outsideZone that answers both names with the
// outside host's address, then restarts it and waits for the rollout: a restart, not the reload
// plugin, whose pick-up time depends on the kubelet's ConfigMap sync.
func addOutsideZone(ctx context.Context, cfg *envconf.Config) error {
	r, err := cfg.NewClient()
	if err != nil {
		return err
	}
	res := r.Resources("kube-system")
	var cm corev1.ConfigMap
	if err := res.Get(ctx, "coredns", "kube-system", &cm); err != nil {
		return fmt.Errorf("read CoreDNS's ConfigMap: %w", err)
	}
	if !strings.Contains(cm.Data["Corefile"], outsideZone+":53") {
		cm.Data["Corefile"] += fmt.Sprintf("%s:53 {\n    hosts {\n        %s %s %s\n    }\n}\n", outsideZone, outsideIP, allowedHost, blockedHost)
		if err := res.Update(ctx, &cm); err != nil {
			return fmt.Errorf("update CoreDNS's ConfigMap: %w", err)
		}
	}
	var dep appsv1.Deployment
	if err := res.Get(ctx, "coredns", "kube-system", &dep); err != nil {
		return fmt.Errorf("read CoreDNS's Deployment: %w", err)
	}
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations["tatara.dev/outside-zone"] = outsideZone
	if err := res.Update(ctx, &dep); err != nil {
		return fmt.Errorf("restart CoreDNS: %w", err)
	}
	return wait.For(func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := res.Get(ctx, "coredns", "kube-system", &d); err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	}, wait.WithContext(ctx), wait.WithTimeout(2*time.Minute), wait.WithInterval(time.Second))
}

// outsideSeen is what the outside host was asked, in order.
type outsideSeen struct {
	Scheme, Host, Path, Remote string
}

func outsideRequests(ctx context.Context) ([]outsideSeen, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, outsideControl+"/seen", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Seen []outsideSeen `json:"seen"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode the outside host's /seen: %w", err)
	}
	return out.Seen, nil
}
