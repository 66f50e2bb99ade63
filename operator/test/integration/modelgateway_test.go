package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

func withModel(budget int64) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) {
		p.Spec.Agent.Model = &tatarav1.AgentModel{BaseURL: "https://model.example.test", SecretName: "model-key", TaskTokenBudget: budget}
	}
}

// projectCondition waits for the Project's condition of type typ to have status and reason.
func projectCondition(t testing.TB, ns, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, 20*time.Second, fmt.Sprintf("project %s condition %s=%s (%s)", name, typ, status, reason), func() error {
		var p tatarav1.Project
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition %+v", c)
		}
		got = *c
		return nil
	})
	return got
}

// TestModelGatewayProject: the API server refuses a Project that names a model and still gives the
// agent the model's variables; a Project with a model is Ready only once its Secret exists, and
// its Tasks' pods get the gateway and no credential in the agent's container; a Project that gives
// the agent a key in extraEnvs works, and its ModelKeyVisible condition says so.
func TestModelGatewayProject(t *testing.T) {
	startOperator(t, withRepoSecretRecheck(time.Second))
	ns := newNamespace(t)
	ctx := context.Background()

	for _, name := range []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} {
		p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "bypass-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")), Namespace: ns},
			Spec: tatarav1.ProjectSpec{Agent: tatarav1.ProjectAgent{ExtraEnvs: []corev1.EnvVar{{Name: name, Value: "x"}}}}}
		withModel(0)(p)
		if err := k8s.Create(ctx, p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "with model set, extraEnvs may not set") {
			t.Errorf("a Project with a model and %s in extraEnvs: %v, want refused", name, err)
		}
	}

	reads := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "reads-the-key", Namespace: ns},
		Spec: tatarav1.ProjectSpec{Agent: tatarav1.ProjectAgent{ExtraEnvs: []corev1.EnvVar{{Name: "MY_KEY", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "model-key"}, Key: "api-key"}}}}}}}
	withModel(0)(reads)
	if err := k8s.Create(ctx, reads); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "extraEnvs may not read model.secretName") {
		t.Errorf("a Project whose extraEnvs read its model Secret: %v, want refused", err)
	}

	newProject(t, ns, "gw", withModel(1000))
	c := projectCondition(t, ns, "gw", tatarav1.ProjectConditionReady, metav1.ConditionFalse, tatarav1.ReasonModelSecretMissing)
	if !strings.Contains(c.Message, `"model-key"`) {
		t.Errorf("Ready message %q does not name the model Secret", c.Message)
	}
	projectCondition(t, ns, "gw", tatarav1.ProjectConditionModelKeyVisible, metav1.ConditionFalse, tatarav1.ReasonModelGateway)
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-key", Namespace: ns},
		StringData: map[string]string{agent.DefaultModelSecretKey: "the-key"}}); err != nil {
		t.Fatal(err)
	}
	projectCondition(t, ns, "gw", tatarav1.ProjectConditionReady, metav1.ConditionTrue, tatarav1.ReasonAgentPodsBuildable)

	newTask(t, ns, "metered", "gw", tatarav1.KindImplement)
	pod := waitPod(t, ns, "metered")
	var gateway *corev1.Container
	for i, c := range pod.Spec.InitContainers {
		if c.Name == agent.ModelGatewayContainer {
			gateway = &pod.Spec.InitContainers[i]
		}
	}
	if gateway == nil || !strings.Contains(strings.Join(gateway.Args, " "), "--token-budget=1000") {
		t.Fatalf("the agent pod's model gateway: %+v, want one with the Project's budget", gateway)
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == agent.ModelAPIKeyEnv && e.Value != agent.ModelAPIKeyPlaceholder {
			t.Errorf("the agent's %s = %q, want the placeholder", e.Name, e.Value)
		}
	}

	newProject(t, ns, "visible", func(p *tatarav1.Project) {
		p.Spec.Agent.ExtraEnvs = []corev1.EnvVar{{Name: "ANTHROPIC_API_KEY", Value: "in-the-agent"}}
	})
	c = projectCondition(t, ns, "visible", tatarav1.ProjectConditionModelKeyVisible, metav1.ConditionTrue, tatarav1.ReasonModelKeyInExtraEnvs)
	if !strings.Contains(c.Message, "ANTHROPIC_API_KEY") {
		t.Errorf("ModelKeyVisible message %q does not name the variable", c.Message)
	}
	projectCondition(t, ns, "visible", tatarav1.ProjectConditionReady, metav1.ConditionTrue, tatarav1.ReasonAgentPodsBuildable)
}
