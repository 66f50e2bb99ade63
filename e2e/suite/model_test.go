//go:build e2e

package suite

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/yaml"

	"tatara.dev/e2e/internal/model"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// The model stand-in: the only double of the suite. The kind environment's Project reaches it
// through each agent pod's model gateway (project.model in helmfile/environments/kind.yaml).
const (
	modelNamespace = "tatara-e2e"
	modelName      = "model-standin"
	modelPort      = 8080
)

// modelKey is this run's model API key: the stand-in refuses any other, and only the agent pods'
// model gateways have it (the kind environment's model Secret), so every answered request proves
// a gateway added it. The attacker feature looks for it everywhere the agent can read.
var modelKey = "e2e-model-" + rand.Text()

// keptModelKey reads the key of the model stand-in a kept cluster runs (E2E_KEEP_CLUSTER=1), so
// that this run's Secret carries it instead of a new one.
func keptModelKey(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	var sec corev1.Secret
	if err := cfg.Client().Resources().Get(ctx, modelName, modelNamespace, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return ctx, nil // the earlier run stopped before it deployed the stand-in
		}
		return ctx, fmt.Errorf("failed to read the kept model stand-in's key: %w", err)
	}
	key := string(sec.Data["api-key"])
	if key == "" {
		return ctx, fmt.Errorf("secret %s/%s lacks api-key", modelNamespace, modelName)
	}
	modelKey = key
	return ctx, nil
}

// kindModel reads the kind environment's project.model: the model's address and Secret have one
// source, which the suite follows.
func kindModel() (tatarav1.AgentModel, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "helmfile", "environments", "kind.yaml"))
	if err != nil {
		return tatarav1.AgentModel{}, err
	}
	var env struct {
		Project struct {
			Model     tatarav1.AgentModel `json:"model"`
			ExtraEnvs map[string]string   `json:"extraEnvs"`
		} `json:"project"`
	}
	if err := yaml.Unmarshal(raw, &env); err != nil {
		return tatarav1.AgentModel{}, fmt.Errorf("helmfile/environments/kind.yaml: %w", err)
	}
	want := fmt.Sprintf("http://%s.%s.svc:%d", modelName, modelNamespace, modelPort)
	if got := env.Project.Model.BaseURL; got != want {
		return tatarav1.AgentModel{}, fmt.Errorf("kind.yaml project.model.baseURL = %q, want the suite's model stand-in %q", got, want)
	}
	if env.Project.Model.SecretName == "" {
		return tatarav1.AgentModel{}, fmt.Errorf("kind.yaml project.model.secretName is empty")
	}
	for _, name := range []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} {
		if _, ok := env.Project.ExtraEnvs[name]; ok {
			return tatarav1.AgentModel{}, fmt.Errorf("kind.yaml project.extraEnvs sets %s: the agent must reach the model only through its gateway", name)
		}
	}
	return env.Project.Model, nil
}

// createModelSecret puts this run's model key into the kind environment's model Secret in the
// agent namespace, before helmfile creates the Project that names it.
func createModelSecret(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	m, err := kindModel()
	if err != nil {
		return ctx, err
	}
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	key := m.SecretKey
	if key == "" {
		key = "api-key"
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.SecretName, Namespace: agentNamespace}, StringData: map[string]string{key: modelKey}}
	if _, err := cs.CoreV1().Secrets(agentNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return ctx, fmt.Errorf("secret %s: %w", m.SecretName, err)
		}
		// A reused cluster keeps its Secret: this run's key goes into it, as into the stand-in's.
		if _, err := cs.CoreV1().Secrets(agentNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return ctx, fmt.Errorf("secret %s: %w", m.SecretName, err)
		}
	}
	return ctx, nil
}

// deployModelStandin runs the model stand-in image (one of images) as a Deployment and Service,
// requiring the API key the kind environment gives the agents, and waits until it is Available.
func deployModelStandin(images []string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		i := slices.IndexFunc(images, func(img string) bool { return strings.Contains(img, "/tatara-model-standin:") })
		if i < 0 {
			return ctx, fmt.Errorf("E2E_IMAGES has no tatara-model-standin image: %v", images)
		}
		r, err := resources.New(cfg.Client().RESTConfig())
		if err != nil {
			return ctx, err
		}
		labels := map[string]string{"app.kubernetes.io/name": modelName, "app.kubernetes.io/part-of": "tatara-e2e"}
		meta := metav1.ObjectMeta{Name: modelName, Namespace: modelNamespace, Labels: labels}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: modelNamespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted"}}}
		secret := &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"api-key": modelKey}}
		dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: modelName, Image: images[i], ImagePullPolicy: corev1.PullNever,
						Args:  []string{"--listen", fmt.Sprintf(":%d", modelPort), "--api-key-file", "/etc/model-standin/api-key"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: modelPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/healthz", Port: intstr.FromInt32(modelPort)}}, PeriodSeconds: 1},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "api-key", MountPath: "/etc/model-standin", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "api-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: modelName}}}},
				},
			},
		}}
		svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: modelPort, TargetPort: intstr.FromInt32(modelPort)}}}}
		if err := createOrKeep(ctx, r, ns, secret, dep, svc); err != nil {
			return ctx, err
		}
		if err := wait.For(conditions.New(r).DeploymentConditionMatch(dep, appsv1.DeploymentAvailable, corev1.ConditionTrue),
			wait.WithTimeout(waitTimeout)); err != nil {
			return ctx, fmt.Errorf("model stand-in not Available: %w", err)
		}
		return ctx, nil
	}
}

// modelScript is a Task directive the model stand-in follows; the Task name is the script id.
func modelScript(id string, steps ...string) string {
	return strings.Join(append([]string{model.ScriptHeader + " id=" + id}, steps...), "\n") + "\n"
}

// modelRecords reads what the model stand-in was asked for one script, through the API server's
// service proxy.
func modelRecords(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, script string) []model.Record {
	t.Helper()
	path := fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%d/proxy/recorded", modelNamespace, modelName, modelPort)
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("script", script).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var out model.Records
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if out.Dropped > 0 {
		t.Errorf("the model stand-in dropped %d records", out.Dropped)
	}
	return out.Records
}

// offeredTatara is the sorted tatara tool names a request offered the model (schemas sent, or
// named for tool search when deferred), and how many of them were deferred.
func offeredTatara(rec model.Record) ([]string, int) {
	var names []string
	deferred := 0
	for _, n := range rec.Tools {
		if name, ok := strings.CutPrefix(n, model.MCPToolPrefix); ok {
			names = append(names, name)
		}
	}
	for _, n := range rec.DeferredTools {
		if name, ok := strings.CutPrefix(n, model.MCPToolPrefix); ok {
			names = append(names, name)
			deferred++
		}
	}
	slices.Sort(names)
	return names, deferred
}

// checkModelSawProfile asserts the first model request of a Task offered exactly the profile's
// tools, all inline (tool search false) or all deferred (true), and that the script ran without
// a tool error or a script error.
func checkModelSawProfile(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, script, profile string, toolSearch bool) {
	t.Helper()
	var turns []model.Record
	for _, rec := range modelRecords(ctx, t, cs, script) {
		if rec.Endpoint == "messages" {
			turns = append(turns, rec)
		}
	}
	if len(turns) == 0 {
		t.Fatalf("script %s: the model stand-in got no request", script)
	}
	want := profileToolNames(profile)
	got, deferred := offeredTatara(turns[0])
	if !slices.Equal(got, want) {
		t.Errorf("script %s: the model was offered %d tatara tools, want the %d of profile %q\n got %v\nwant %v", script, len(got), len(want), profile, got, want)
	}
	switch {
	case toolSearch && deferred != len(got):
		t.Errorf("script %s: tool search on, but %d of %d tatara tools were sent with their schema", script, len(got)-deferred, len(got))
	case !toolSearch && deferred != 0:
		t.Errorf("script %s: tool search off, but %d tatara tools were deferred", script, deferred)
	}
	for _, rec := range turns {
		if rec.Error != "" || len(rec.ToolErrors) > 0 {
			t.Errorf("script %s request %d: error %q, tool errors %v", script, rec.Seq, rec.Error, rec.ToolErrors)
		}
	}
}
