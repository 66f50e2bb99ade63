//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
)

// The model stand-in: the only double of the suite. The kind environment's Project points the
// agent CLI at this Service (ANTHROPIC_BASE_URL in helmfile/environments/kind.yaml).
const (
	modelNamespace = "tatara-e2e"
	modelName      = "model-standin"
	modelPort      = 8080
)

// kindAgentEnv reads the kind environment's project.extraEnvs: the model's address and API key
// have one source, which the suite follows.
func kindAgentEnv() (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "helmfile", "environments", "kind.yaml"))
	if err != nil {
		return nil, err
	}
	var env struct {
		Project struct {
			ExtraEnvs map[string]string `json:"extraEnvs"`
		} `json:"project"`
	}
	if err := yaml.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("helmfile/environments/kind.yaml: %w", err)
	}
	want := fmt.Sprintf("http://%s.%s.svc:%d", modelName, modelNamespace, modelPort)
	if got := env.Project.ExtraEnvs["ANTHROPIC_BASE_URL"]; got != want {
		return nil, fmt.Errorf("kind.yaml project.extraEnvs.ANTHROPIC_BASE_URL = %q, want the suite's model stand-in %q", got, want)
	}
	if env.Project.ExtraEnvs["ANTHROPIC_API_KEY"] == "" {
		return nil, fmt.Errorf("kind.yaml project.extraEnvs.ANTHROPIC_API_KEY is empty")
	}
	return env.Project.ExtraEnvs, nil
}

// deployModelStandin runs the model stand-in image (one of images) as a Deployment and Service,
// requiring the API key the kind environment gives the agents, and waits until it is Available.
func deployModelStandin(images []string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		i := slices.IndexFunc(images, func(img string) bool { return strings.Contains(img, "/tatara-model-standin:") })
		if i < 0 {
			return ctx, fmt.Errorf("E2E_IMAGES has no tatara-model-standin image: %v", images)
		}
		agentEnv, err := kindAgentEnv()
		if err != nil {
			return ctx, err
		}
		r, err := resources.New(cfg.Client().RESTConfig())
		if err != nil {
			return ctx, err
		}
		labels := map[string]string{"app.kubernetes.io/name": modelName, "app.kubernetes.io/part-of": "tatara-e2e"}
		meta := metav1.ObjectMeta{Name: modelName, Namespace: modelNamespace, Labels: labels}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: modelNamespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted"}}}
		secret := &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"api-key": agentEnv["ANTHROPIC_API_KEY"]}}
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
