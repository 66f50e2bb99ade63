package charts_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/testkit/testutil"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// applyForReal server-side applies objects (persisted, unlike the dry runs).
func applyForReal(t *testing.T, c client.Client, objs []*unstructured.Unstructured, skipKinds ...string) {
	t.Helper()
	for _, o := range objs {
		if strings.Contains(" "+strings.Join(skipKinds, " ")+" ", " "+o.GetKind()+" ") {
			continue
		}
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("tatara-chart-tests"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("failed to apply %s: %v", describe(o), err)
		}
	}
}

// TestOperatorRunsWithTheChartsRBAC runs the real operator binary, with the arguments of the
// chart's Deployment and as the chart's ServiceAccount (nothing but the chart's ClusterRole and
// Roles), against the real API server: it must become ready, take the leader lease, read the
// runtime ConfigMaps the cli and wrapper charts publish, and build an agent pod for a Task of a
// Project from the tatara-project chart in its agent namespace (agentNamespaces), without a single
// "forbidden"; and that ServiceAccount can touch no Secret or pod in any other namespace.
func TestOperatorRunsWithTheChartsRBAC(t *testing.T) {
	// Built before the clock starts: a cold compile on a busy 2-core CI machine has taken
	// longer than the whole behaviour budget; go test's own -timeout still bounds it.
	bin := testutil.BuildBinary(t, filepath.Join(testutil.WorkspaceDir(t), "operator"), "./cmd")

	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	st := loadPins(t)
	cliImage := "tatara.local/tatara-cli:" + componentVersion(t, st, "cli")
	wrapperImage := "tatara.local/tatara-wrapper:" + componentVersion(t, st, "wrapper")
	const agentImage = "tatara.local/tatara-agent-standin:0.1.0"
	applyForReal(t, c, mustRender(t, "tatara-cli", nil).objects)
	applyForReal(t, c, mustRender(t, "tatara-wrapper", nil).objects)
	op := mustRender(t, "tatara-operator", nil)
	// The Deployment is not applied: there is no kubelet; the test runs its container instead.
	applyForReal(t, c, op.objects, "Deployment")
	project := mustRender(t, "tatara-project", map[string]any{
		"name":  "demo",
		"repos": map[string]any{"demo": map[string]any{"url": "https://git.example.com/demo.git"}},
		"agent": map[string]any{"image": agentImage},
	})
	applyForReal(t, c, project.objects)

	// Credentials of exactly the chart's ServiceAccount.
	sa := "system:serviceaccount:tatara-system:tatara-operator"
	user, err := testEnv.AddUser(envtest.User{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:tatara-system", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatalf("failed to add user %s: %v", sa, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// The chart's container args, with the listen addresses moved to free loopback ports.
	dep := op.find("Deployment", "tatara-operator")
	container := nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	health := freePort(t)
	var args []string
	for _, a := range container["args"].([]any) {
		arg := a.(string)
		switch {
		case strings.HasPrefix(arg, "--health-probe-bind-address="):
			arg = fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health)
		case strings.HasPrefix(arg, "--metrics-bind-address="):
			arg = fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", freePort(t))
		case strings.HasPrefix(arg, "--api-bind-address="):
			arg = fmt.Sprintf("--api-bind-address=127.0.0.1:%d", freePort(t))
		}
		args = append(args, arg)
	}
	var logs testutil.SyncBuffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"KUBECONFIG=" + kubeconfigPath, "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("operator logs:\n%s", logs.String())
		}
	}()

	poll := func(what string, cond func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, cond); err != nil {
			t.Fatalf("operator never got to %s: %v", what, err)
		}
	}
	poll("ready", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	poll("hold the leader lease in tatara-system", func(ctx context.Context) (bool, error) {
		var leases coordinationv1.LeaseList
		if err := c.List(ctx, &leases, client.InNamespace("tatara-system")); err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				return true, nil
			}
		}
		return false, nil
	})

	task := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tatara.dev/v1alpha1",
		"kind":       "Task",
		"metadata":   map[string]any{"name": "rbac-check", "namespace": "tatara-agents"},
		"spec": map[string]any{
			"kind":       "implement",
			"projectRef": map[string]any{"name": "demo"},
			"repo":       "demo",
			"directive":  "prove the chart's RBAC is enough",
		},
	}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatalf("failed to create Task: %v", err)
	}
	var pod corev1.Pod
	poll("create the agent pod", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "tatara-agents", Name: "tatara-agent-rbac-check"}, &pod)
		return err == nil, nil
	})
	images := map[string]string{}
	for _, ct := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		images[ct.Name] = ct.Image
	}
	// The Project names an agent image: the main container runs it, the wrapper copied in from
	// the wrapper image by workspace-init, which clones the Task's repo there too.
	if images["cli"] != cliImage || images["workspace-init"] != wrapperImage || images["wrapper"] != agentImage {
		t.Errorf("agent pod images %v, want cli=%s workspace-init=%s (from the runtime ConfigMaps) wrapper=%s (the Project's agent image)",
			images, cliImage, wrapperImage, agentImage)
	}
	// The status patch is the last write of a reconcile: once podName is recorded, every verb the
	// first reconcile needs has been exercised.
	poll("record the pod in the Task status", func(ctx context.Context) (bool, error) {
		var got unstructured.Unstructured
		got.SetGroupVersionKind(task.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(task), &got); err != nil {
			return false, err
		}
		name, _, _ := unstructured.NestedString(got.Object, "status", "podName")
		return name == pod.Name, nil
	})
	if strings.Contains(strings.ToLower(logs.String()), "forbidden") {
		t.Errorf("the operator hit a permission it lacks:\n%s", logs.String())
	}
	// REST API TLS is on by default: the operator issued its certificate into the chart's empty
	// Secret with nothing but get and update on it, and agent pods trust that CA.
	var issued corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tatara-system", Name: "tatara-operator-api-tls"}, &issued); err != nil {
		t.Fatalf("the API's certificate Secret: %v", err)
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(issued.Data[k]) == 0 {
			t.Errorf("the operator did not issue %s into Secret tatara-operator-api-tls (keys %v)", k, slices.Collect(maps.Keys(issued.Data)))
		}
	}
	if got := envValue(append(pod.Spec.InitContainers, pod.Spec.Containers...), "cli", "TATARA_OPERATOR_CA_BUNDLE"); got == "" || got != string(issued.Data["ca.crt"]) {
		t.Errorf("the agent pod's cli trusts CA bundle %q, want the issued ca.crt", got)
	}

	// Outside the agent namespaces the ServiceAccount is powerless: a real request as it is
	// refused, and the authorizer denies every Secret and pod verb there and cluster-wide.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rbac-elsewhere"}}
	if err := c.Create(ctx, other); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-the-operators", Namespace: other.Name},
		StringData: map[string]string{"k": "v"}}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	asSA, err := client.New(user.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := asSA.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator's ServiceAccount reading a Secret in namespace %s: err %v, want Forbidden", other.Name, err)
	}
	can := func(verb, resource, ns string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:tatara-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: resource},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatalf("SubjectAccessReview %s %s in %q: %v", verb, resource, ns, err)
		}
		return sar.Status.Allowed
	}
	for _, ns := range []string{other.Name, "tatara-system", ""} {
		for _, res := range []string{"secrets", "pods"} {
			for _, verb := range []string{"get", "list", "watch", "create", "delete"} {
				if can(verb, res, ns) {
					t.Errorf("the operator's ServiceAccount may %s %s in namespace %q (\"\": cluster-wide)", verb, res, ns)
				}
			}
		}
	}
	// The positive control: the same review allows what the operator just did in tatara-agents.
	for _, res := range []string{"secrets", "pods"} {
		if !can("get", res, "tatara-agents") {
			t.Errorf("SubjectAccessReview denies get %s in tatara-agents, which the operator needs", res)
		}
	}
}

// envValue is the value of env var name in the container named container ("" when absent).
func envValue(containers []corev1.Container, container, name string) string {
	for _, c := range containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}
