package charts_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"tatara.dev/charts/internal/pins"
	"tatara.dev/testkit/testutil"
)

// run runs a pinned tool and returns its stdout; stderr goes into the failure message.
func run(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), &toolError{cmd: filepath.Base(bin) + " " + strings.Join(args, " "), err: err, stderr: stderr.String() + stdout.String()}
	}
	return stdout.String(), nil
}

type toolError struct {
	cmd, stderr string
	err         error
}

func (e *toolError) Error() string { return e.cmd + ": " + e.err.Error() + "\n" + e.stderr }

// TestHelmLintStrict runs the pinned `helm lint --strict` on every chart, with monitoring off
// and on.
func TestHelmLintStrict(t *testing.T) {
	helm := requireTool(t, "TATARA_HELM", "helm")
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"lint", "--strict", "--namespace", namespaceOf[tc.chart], chartDir(t, tc.chart)}
			if tc.vals != nil {
				data, err := yaml.Marshal(tc.vals)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, data, 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--values", f)
			}
			out, err := run(t, testutil.WorkspaceDir(t), helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint output:\n%s", out)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint reports problems:\n%s", out)
			}
		})
	}
}

// helmfileTemplate runs the pinned `helmfile template` for an environment.
func helmfileTemplate(t *testing.T, env string) string {
	t.Helper()
	helm := requireTool(t, "TATARA_HELM", "helm")
	helmfile := requireTool(t, "TATARA_HELMFILE", "helmfile")
	out, err := run(t, filepath.Join(testutil.WorkspaceDir(t), "helmfile"), helmfile,
		"--helm-binary", helm, "--environment", env, "--file", "helmfile.yaml", "template", "--include-crds")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertE2EMonitoring: kind, and only kind, renders the e2e monitoring stack, whose Prometheus runs
// the pinned image and selects every PodMonitor, ServiceMonitor and PrometheusRule of the cluster.
func assertE2EMonitoring(t *testing.T, st *pins.State, env, registry string, objs []*unstructured.Unstructured) {
	t.Helper()
	var prom *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Prometheus" {
			prom = o
		}
		if env != "kind" && (o.GetNamespace() == "monitoring" || strings.HasPrefix(o.GetName(), pins.MonitoringRelease)) {
			t.Errorf("helmfile -e %s renders %s of the e2e monitoring stack", env, describe(o))
		}
	}
	if env != "kind" {
		if prom != nil {
			t.Errorf("helmfile -e %s renders %s", env, describe(prom))
		}
		return
	}
	if prom == nil {
		t.Fatal("helmfile -e kind renders no Prometheus")
	}
	var version string
	for _, img := range pins.PinnedImages {
		if img.Name == "prometheus" {
			version = st.PinnedVersion(img)
		}
	}
	if want := registry + "/prometheus:" + version; nested(t, prom, "spec", "image") != want {
		t.Errorf("Prometheus image %v, want %s", nested(t, prom, "spec", "image"), want)
	}
	for _, sel := range []string{"podMonitorSelector", "podMonitorNamespaceSelector", "serviceMonitorSelector",
		"serviceMonitorNamespaceSelector", "ruleSelector", "ruleNamespaceSelector"} {
		if got, ok := nested(t, prom, "spec", sel).(map[string]any); !ok || len(got) != 0 {
			t.Errorf("Prometheus %s is %v, want {} (everything)", sel, nested(t, prom, "spec", sel))
		}
	}
}

// TestHelmfileTemplate renders both environments with the pinned helmfile and helm: every
// release renders, the images are the pinned ones, output is deterministic (a bump's diff shows
// only what changed), and the real API server accepts every object. Both render the charts'
// monitoring objects; only kind renders the e2e monitoring stack that they configure there.
func TestHelmfileTemplate(t *testing.T) {
	st := loadPins(t)
	cli, wrapper, operator := componentVersion(t, st, "cli"), componentVersion(t, st, "wrapper"), componentVersion(t, st, "operator")
	agent := componentVersion(t, st, "agent")
	tests := []struct {
		env        string
		registry   string
		agentImage string
		monitoring bool
	}{
		{"kind", "tatara.local", "tatara.local/tatara-agent-claude:" + agent, true},
		{"production", "registry.example.com/tatara", "registry.example.com/tatara/tatara-agent-claude:" + agent, true},
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			out := helmfileTemplate(t, tc.env)
			if again := helmfileTemplate(t, tc.env); again != out {
				t.Fatal("two helmfile template runs differ: output is not deterministic")
			}
			objs := decodeObjects(t, out)
			find := func(kind, name string) *unstructured.Unstructured {
				for _, o := range objs {
					if o.GetKind() == kind && o.GetName() == name {
						return o
					}
				}
				t.Fatalf("helmfile -e %s renders no %s %s", tc.env, kind, name)
				return nil
			}
			wantCM := map[string]string{
				"tatara-cli-runtime":     tc.registry + "/tatara-cli:" + cli,
				"tatara-wrapper-runtime": tc.registry + "/tatara-wrapper:" + wrapper,
			}
			for name, want := range wantCM {
				if got := nested(t, find("ConfigMap", name), "data", "image"); got != want {
					t.Errorf("ConfigMap %s image %q, want %q", name, got, want)
				}
			}
			dep := find("Deployment", "tatara-operator")
			c := nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
			if want := tc.registry + "/tatara-operator:" + operator; c["image"] != want {
				t.Errorf("operator image %q, want %q", c["image"], want)
			}
			// Each release's check (helmfile test) runs in that release's own pinned image; the
			// project's in the operator's.
			for pod, want := range map[string]string{
				"tatara-cli-release-check":      tc.registry + "/tatara-cli:" + cli,
				"tatara-wrapper-release-check":  tc.registry + "/tatara-wrapper:" + wrapper,
				"tatara-operator-release-check": tc.registry + "/tatara-operator:" + operator,
				"tatara-project-release-check":  tc.registry + "/tatara-operator:" + operator,
			} {
				rc := nested(t, find("Pod", pod), "spec", "containers").([]any)[0].(map[string]any)
				if rc["image"] != want {
					t.Errorf("release check %s runs %q, want %q", pod, rc["image"], want)
				}
			}
			find("CustomResourceDefinition", "tasks.tatara.dev")
			project := find("Project", tc.env)
			// The operator serves the tatara-project release's namespace, and only it.
			if want := "--agent-namespaces=" + project.GetNamespace(); !slices.Contains(c["args"].([]any), any(want)) {
				t.Errorf("operator args %v lack %s (the Project's namespace)", c["args"], want)
			}
			for _, o := range objs {
				// The operator's ClusterRoles create TokenReviews and read nodes, no more
				// (TestOperatorRolesGrantTheNarrowedRules).
				_, operatorClusterRole := clusterRoleRules[o.GetName()]
				if o.GetKind() == "ClusterRole" && strings.HasPrefix(o.GetName(), "tatara-operator") &&
					!strings.HasPrefix(o.GetName(), "tatara-operator-release-check-") && !operatorClusterRole {
					t.Errorf("helmfile -e %s renders %s", tc.env, describe(o))
				}
			}
			if role := find("Role", "tatara-operator"); role.GetNamespace() != project.GetNamespace() {
				t.Errorf("operator Role in namespace %s, want the Project's %s", role.GetNamespace(), project.GetNamespace())
			}
			if tc.agentImage != "" {
				if got := nested(t, project, "spec", "agent", "image"); got != tc.agentImage {
					t.Errorf("Project agent image %q, want %q", got, tc.agentImage)
				}
			}
			hasMonitoring := false
			for _, o := range objs {
				if o.GetKind() == "PodMonitor" || o.GetKind() == "PrometheusRule" || o.GetKind() == "ServiceMonitor" {
					hasMonitoring = true
				}
			}
			if hasMonitoring != tc.monitoring {
				t.Errorf("environment %s renders monitoring objects: %v, want %v", tc.env, hasMonitoring, tc.monitoring)
			}
			assertE2EMonitoring(t, st, tc.env, tc.registry, objs)
			for _, o := range objs {
				if strings.HasSuffix(o.GetName(), ":latest") {
					t.Errorf("%s uses latest", describe(o))
				}
			}
			assertAccepted(t, objs)
		})
	}
}
