//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/test/upgradeprobe"
)

// upgradeTimeout bounds one helmfile sync of the upgrade; failedUpgradeTimeout is the Helm
// timeout of the operator release in the upgrade that must fail (see nextRelease).
const (
	upgradeTimeout       = 8 * time.Minute
	failedUpgradeTimeout = 30 * time.Second
)

// nextRelease is a release MR on a copy of the repository's charts and helmfile: the operator
// bumped to version with `make bump` (its chart, the project chart and the helmfile pins), its
// image tag then set to tag, and the upgrade's CRD change (operator/test/upgradeprobe) in the
// operator chart. It returns the copy's helmfile.
func nextRelease(t *testing.T, version, tag string) string {
	t.Helper()
	root := t.TempDir()
	for _, dir := range []string{"charts", "helmfile", filepath.Join("e2e", "charts")} {
		if err := os.CopyFS(filepath.Join(root, dir), os.DirFS(filepath.Join(repoRoot, dir))); err != nil {
			t.Fatalf("copying %s: %v", dir, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	versions, err := os.ReadFile(filepath.Join(repoRoot, "hack", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "versions.env"), versions, 0o644); err != nil {
		t.Fatal(err)
	}
	bump := exec.Command("go", "run", "./cmd/pins", "bump", "--root", root, "--component", "operator", "--version", version)
	bump.Dir = filepath.Join(repoRoot, "charts")
	if out, err := bump.CombinedOutput(); err != nil {
		t.Fatalf("make bump of the operator to %s: %v\n%s", version, err, out)
	}
	helmfile := filepath.Join(root, "helmfile", "helmfile.yaml")
	if tag != version {
		raw, err := os.ReadFile(helmfile)
		if err != nil {
			t.Fatal(err)
		}
		pin := "tag: " + version + "\n"
		if n := strings.Count(string(raw), pin); n != 1 {
			t.Fatalf("the bumped helmfile pins %q %d times, want once (the operator's image)", pin, n)
		}
		// An image that was never built never becomes Ready: the release fails after
		// failedUpgradeTimeout instead of helmDefaults' production 300 s, which would prove
		// nothing more. Only this copy of the helmfile, and only this release, says so.
		release := "  - name: tatara-operator\n    namespace: tatara-system\n"
		if n := strings.Count(string(raw), release); n != 1 {
			t.Fatalf("the helmfile declares %q %d times, want once", release, n)
		}
		edited := strings.Replace(string(raw), pin, "tag: "+tag+"\n", 1)
		edited = strings.Replace(edited, release, release+fmt.Sprintf("    timeout: %d\n", int(failedUpgradeTimeout.Seconds())), 1)
		if err := os.WriteFile(helmfile, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crdFile := filepath.Join(root, "charts", "tatara-operator", "files", "crds", "tatara.dev_tasks.yaml")
	crd := readCRD(t, crdFile)
	if err := upgradeprobe.Apply(&crd); err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crdFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return helmfile
}

func readCRD(t *testing.T, file string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd
}

// checkClusterCRDs fails unless every CRD file under the chart's files/crds of root is in the
// cluster with the same versions and schemas.
func checkClusterCRDs(ctx context.Context, t *testing.T, r *resources.Resources, root string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "charts", "tatara-operator", "files", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", root, err)
	}
	for _, f := range files {
		want := readCRD(t, f)
		var got apiextensionsv1.CustomResourceDefinition
		if err := r.Get(ctx, want.Name, "", &got); err != nil {
			t.Fatalf("CRD %s: %v", want.Name, err)
		}
		if len(got.Spec.Versions) != len(want.Spec.Versions) {
			t.Errorf("CRD %s serves %d versions, the chart has %d", want.Name, len(got.Spec.Versions), len(want.Spec.Versions))
			continue
		}
		for i, w := range want.Spec.Versions {
			g := got.Spec.Versions[i]
			if g.Name != w.Name || g.Served != w.Served || g.Storage != w.Storage || !equality.Semantic.DeepEqual(g.Schema, w.Schema) {
				t.Errorf("CRD %s version %s in the cluster differs from the chart's (%s)", want.Name, w.Name, f)
			}
		}
	}
}

// releaseRevision is the revision a Helm release is deployed at, and its chart.
func releaseRevision(ctx context.Context, t *testing.T, cfg *envconf.Config, namespace, release string) (int, string) {
	t.Helper()
	out, err := helm(ctx, t, cfg, "status", release, "--namespace", namespace, "--output", "json")
	if err != nil {
		t.Fatalf("helm status %s: %v\n%s", release, err, out)
	}
	var st struct {
		Version int `json:"version"`
		Info    struct {
			Status string `json:"status"`
		} `json:"info"`
		Chart struct {
			Metadata struct {
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"chart"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("helm status %s: %v\n%s", release, err, out)
	}
	if st.Info.Status != "deployed" {
		t.Errorf("release %s is %s at revision %d, want deployed", release, st.Info.Status, st.Version)
	}
	return st.Version, st.Chart.Metadata.Version
}

// operatorImage is the image of the operator Deployment's container, and its replica count.
func operatorImage(ctx context.Context, t *testing.T, r *resources.Resources) (string, int32) {
	t.Helper()
	var dep appsv1.Deployment
	if err := r.Get(ctx, operatorDeployment, systemNamespace, &dep); err != nil {
		t.Fatal(err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "operator" {
			return c.Image, *dep.Spec.Replicas
		}
	}
	t.Fatalf("the operator Deployment has no container \"operator\": %+v", dep.Spec.Template.Spec.Containers)
	return "", 0
}

// taskField reads a spec field of a Task as the API server serves it, whether or not this
// suite's Task type knows it.
func taskField(ctx context.Context, t *testing.T, r *resources.Resources, name, field string) (string, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tatarav1.GroupVersion.WithKind("Task"))
	if err := r.Get(ctx, name, agentNamespace, u); err != nil {
		t.Fatal(err)
	}
	v, ok, err := unstructured.NestedString(u.Object, "spec", field)
	if err != nil {
		t.Fatalf("task %s spec.%s: %v", name, field, err)
	}
	return v, ok
}

// TestUpgradeAndRollback: the helmfile pipeline's day two on the running install. A release MR
// bumps the operator (and the project chart) to the next patch version and changes the Task CRD
// (a test-only field and kind). First with an image tag that was never built: the sync fails, Helm
// rolls the operator back (atomic) and the cluster runs the first release, CRDs included. Then the
// fixed MR: while a real agent's Task spans both syncs, the operator is upgraded, the cluster's CRDs
// equal the chart's, the running Task keeps the new field, `helmfile test` passes, and the Task
// Succeeds with no tool error; a Project's warm pool is recycled, its pod rebuilt by the new
// operator. Last, `helm rollback` to the first versions: the first CRDs and
// operator, both replicas, `helmfile test` and an empty diff; a Task of the kind only the upgrade
// knew is refused by the older operator, and no pod is started for it; the pool is recycled again.
func TestUpgradeAndRollback(t *testing.T) {
	aloneFeature(t)
	const name = "upgrade"
	upgradeImage := os.Getenv("E2E_UPGRADE_IMAGE")
	var (
		next, firstImage      string
		firstOperatorRevision int
		firstProjectRevision  int
		firstProjectChart     string
		task, probe           *tatarav1.Task
		pod                   *corev1.Pod
		upgraded              string
		poolPod               *corev1.Pod
	)
	f := features.New("upgrade and rollback").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			repo, tag, ok := strings.Cut(upgradeImage[strings.LastIndex(upgradeImage, "/")+1:], ":")
			if upgradeImage == "" || !ok || repo != "tatara-operator" {
				t.Fatalf("E2E_UPGRADE_IMAGE=%q: want the upgrade's operator image <registry>/tatara-operator:<next version> (make e2e builds it: make upgrade-image)", upgradeImage)
			}
			next = tag
			if _, err := envfuncs.LoadImageToCluster(clusterName, upgradeImage)(ctx, cfg); err != nil {
				t.Fatalf("loading %s: %v", upgradeImage, err)
			}
			r, _ := clients(t, cfg)
			firstImage, _ = operatorImage(ctx, t, r)
			firstOperatorRevision, _ = releaseRevision(ctx, t, cfg, systemNamespace, "tatara-operator")
			firstProjectRevision, firstProjectChart = releaseRevision(ctx, t, cfg, agentNamespace, "tatara-project")
			// In Setup: the Task (and its Project, removed when this t ends) must span both upgrades.
			task, pod = waitingAgent(ctx, t, cfg, name)
			// A warm pool that the upgrade and the rollback each recycle.
			pool := projectCopy(ctx, t, cfg, name+"-pool", func(p *tatarav1.Project) {
				p.Spec.WarmPool = []tatarav1.WarmPool{{Kind: tatarav1.KindBrainstorm, Size: 1, Repo: demoRepo}}
			})
			t.Cleanup(func() { deleteProjects(context.Background(), t, r, pool) })
			poolPod = claimablePoolPod(ctx, t, r, pool.Name, tatarav1.KindBrainstorm)
			return ctx
		}).
		Assess("an upgrade whose image was never built fails and leaves the first release running", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			missing := next + "-never-built"
			start := time.Now()
			syncCtx, cancel := context.WithTimeout(ctx, upgradeTimeout)
			defer cancel()
			out, err := helmfileIn(syncCtx, cfg, nextRelease(t, next, missing), "sync")
			logf("failed upgrade (operator image tag %s): helmfile sync exited after %.0fs", missing, time.Since(start).Seconds())
			if err == nil {
				t.Fatalf("helmfile sync with the operator's image tag %s passed:\n%s", missing, out)
			}
			if !strings.Contains(out, "tatara-operator") {
				t.Errorf("the failed sync's output does not name the release tatara-operator:\n%s", out)
			}
			if img, _ := operatorImage(ctx, t, r); img != firstImage {
				t.Errorf("after the failed upgrade the operator runs %s, want the first release's %s", img, firstImage)
			}
			if rev, chart := releaseRevision(ctx, t, cfg, agentNamespace, "tatara-project"); rev != firstProjectRevision || chart != firstProjectChart {
				t.Errorf("the failed upgrade touched tatara-project (revision %d, chart %s; before %d, %s): a release after the failed one must not be upgraded",
					rev, chart, firstProjectRevision, firstProjectChart)
			}
			checkClusterCRDs(ctx, t, r, repoRoot)
			waitOperatorSettled(ctx, t, r, cs)
			return ctx
		}).
		Assess("the fixed upgrade, with the Task still in flight", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			helmfile := nextRelease(t, next, next)
			start := time.Now()
			syncCtx, cancel := context.WithTimeout(ctx, upgradeTimeout)
			defer cancel()
			if out, err := helmfileIn(syncCtx, cfg, helmfile, "sync"); err != nil {
				t.Fatalf("helmfile sync of the upgrade: %v\n%s", err, out)
			}
			logf("upgrade to operator %s: helmfile sync took %.0fs", next, time.Since(start).Seconds())
			upgraded = upgradeImage
			if img, replicas := operatorImage(ctx, t, r); img != upgradeImage || replicas < 2 {
				t.Errorf("after the upgrade the operator runs %s with %d replicas, want %s with 2", img, replicas, upgradeImage)
			}
			checkClusterCRDs(ctx, t, r, filepath.Dir(filepath.Dir(helmfile)))
			poolPod = recycledPoolPod(ctx, t, r, poolPod)
			patch := fmt.Sprintf(`{"spec":{%q:"kept"}}`, upgradeprobe.Field)
			if err := r.Patch(ctx, task, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)}); err != nil {
				t.Fatalf("setting spec.%s on the running Task: %v", upgradeprobe.Field, err)
			}
			if err := helmfileTestOf(ctx, cfg, helmfile); err != nil {
				t.Errorf("after the upgrade: %v", err)
			}
			// Admitted by the upgrade's CRD, unknown to every operator build.
			probe = newTask(name+"-unknown-kind", kindProject, tatarav1.TaskKind(upgradeprobe.Kind), "never runs")
			if err := r.Create(ctx, probe); err != nil {
				t.Fatalf("creating a Task of kind %s under the upgrade's CRD: %v", upgradeprobe.Kind, err)
			}
			return ctx
		}).
		Assess("the Task that spans the upgrade Succeeds and keeps the new field", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if upgraded == "" {
				t.Fatal("the upgrade failed (above): nothing to check")
			}
			releaseAgent(ctx, t, cfg, task, pod)
			r, _ := clients(t, cfg)
			if v, ok := taskField(ctx, t, r, task.Name, upgradeprobe.Field); !ok || v != "kept" {
				t.Errorf("task %s spec.%s = %q (present %t) after the operator's writes, want \"kept\"", task.Name, upgradeprobe.Field, v, ok)
			}
			return ctx
		}).
		Assess("helm rollback to the first versions", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			for _, rel := range []struct {
				namespace, name string
				revision        int
			}{{systemNamespace, "tatara-operator", firstOperatorRevision}, {agentNamespace, "tatara-project", firstProjectRevision}} {
				if out, err := helm(ctx, t, cfg, "rollback", rel.name, fmt.Sprint(rel.revision), "--namespace", rel.namespace, "--wait", "--timeout", "5m"); err != nil {
					t.Fatalf("helm rollback %s %d: %v\n%s", rel.name, rel.revision, err, out)
				}
			}
			waitOperatorSettled(ctx, t, r, cs)
			if img, replicas := operatorImage(ctx, t, r); img != firstImage || replicas < 2 {
				t.Errorf("after the rollback the operator runs %s with %d replicas, want %s with 2", img, replicas, firstImage)
			}
			checkClusterCRDs(ctx, t, r, repoRoot)
			recycledPoolPod(ctx, t, r, poolPod)
			if err := helmfileTestOf(ctx, cfg, filepath.Join(repoRoot, "helmfile", "helmfile.yaml")); err != nil {
				t.Errorf("after the rollback: %v", err)
			}
			if _, err := diffAfterSync(ctx, cfg); err != nil {
				t.Errorf("after the rollback: %v", err)
			}
			if probe != nil {
				checkRefusedKind(ctx, t, r, probe, firstImage[strings.LastIndex(firstImage, ":")+1:])
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			for _, tk := range []*tatarav1.Task{task, probe} {
				if tk != nil {
					deleteTasks(ctx, t, r, tk)
				}
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// checkRefusedKind waits until the operator of version has refused the Task of a kind it does not
// know (Ready False, reason UnknownKind, naming the kind and the version), and requires that no
// pod was ever started for it.
func checkRefusedKind(ctx context.Context, t *testing.T, r *resources.Resources, task *tatarav1.Task, version string) {
	t.Helper()
	var cur tatarav1.Task
	var last string
	err := wait.For(func(ctx context.Context) (bool, error) {
		if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, tatarav1.ConditionReady)
		if c == nil {
			return false, nil
		}
		last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		return c.Status == metav1.ConditionFalse && c.Reason == tatarav1.ReasonUnknownKind &&
			strings.Contains(c.Message, string(task.Spec.Kind)) && strings.Contains(c.Message, "version "+version), nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
	if err != nil {
		t.Errorf("task %s of kind %s: the operator %s never refused it (last Ready condition: %s): %v", task.Name, task.Spec.Kind, version, last, err)
	}
	if cur.Status.PodName != "" || cur.Status.Phase != tatarav1.PhasePending {
		t.Errorf("task %s of unknown kind %s: phase %s, pod %q; want Pending without a pod", task.Name, task.Spec.Kind, cur.Status.Phase, cur.Status.PodName)
	}
	var pods corev1.PodList
	if err := r.WithNamespace(agentNamespace).List(ctx, &pods, resources.WithLabelSelector("tatara.dev/task="+task.Name)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("task %s of unknown kind %s has pod %s: an operator that does not know a kind must never start its agent", task.Name, task.Spec.Kind, pods.Items[0].Name)
	}
}
