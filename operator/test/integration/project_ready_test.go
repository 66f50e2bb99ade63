package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/controller"
	"tatara.dev/operator/internal/manager"
)

func withRepoSecretRecheck(d time.Duration) opOption {
	return func(o *manager.Options) { o.RepoSecretRecheck = d }
}

// waitProjectReady waits until the Project's Ready condition has status and reason, and returns it.
func waitProjectReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) (*tatarav1.Project, metav1.Condition) {
	t.Helper()
	var p tatarav1.Project
	var cond *metav1.Condition
	eventually(t, 20*time.Second, fmt.Sprintf("project %s/%s Ready=%s %s", ns, name, status, reason), func() error {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		cond = meta.FindStatusCondition(p.Status.Conditions, tatarav1.ProjectConditionReady)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
	return &p, *cond
}

// TestProjectReadyNamesWhatIsMissing: a Project's Ready condition follows what its agent pods need,
// in order, and names each missing piece: the runtime ConfigMaps (missing, then invalid), then a
// repo's Secret (the Secret and the repo); once everything exists it is True, AgentPodsBuildable.
// An unrelated change to a watched ConfigMap leaves an unchanged status as it was.
func TestProjectReadyNamesWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	runtimeNS := "runtime-" + rand.String(6)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runtimeNS}}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, withRuntimeNamespace(runtimeNS), withRepoSecretRecheck(200*time.Millisecond))
	ns := newNamespace(t)
	newProject(t, ns, "p", func(p *tatarav1.Project) {
		p.Spec.Repos = append(p.Spec.Repos, tatarav1.ProjectRepo{
			Name: "demo", URL: "https://git.example.test/tatara/demo.git",
			Credentials: &tatarav1.RepoCredentials{SecretName: "demo-read"},
			Push:        &tatarav1.RepoPush{SecretName: "demo-push"},
		})
	})

	// 1. No runtime ConfigMap at all: the cli's is named.
	_, c := waitProjectReady(t, ns, "p", metav1.ConditionFalse, tatarav1.ReasonRuntimeConfigMissing)
	if !strings.Contains(c.Message, controller.CLIRuntimeConfigMap) || !strings.Contains(c.Message, runtimeNS) {
		t.Errorf("RuntimeConfigMissing message %q does not name %s/%s", c.Message, runtimeNS, controller.CLIRuntimeConfigMap)
	}

	// 2. The wrapper's ConfigMap without an image: invalid, named.
	for name, img := range map[string]string{controller.CLIRuntimeConfigMap: cliImage, controller.WrapperRuntimeConfigMap: ""} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: runtimeNS}, Data: map[string]string{"image": img}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	_, c = waitProjectReady(t, ns, "p", metav1.ConditionFalse, tatarav1.ReasonRuntimeConfigInvalid)
	if !strings.Contains(c.Message, controller.WrapperRuntimeConfigMap) {
		t.Errorf("RuntimeConfigInvalid message %q does not name %s", c.Message, controller.WrapperRuntimeConfigMap)
	}

	// 3. ConfigMaps fixed; the repo's credentials Secret is missing: the Secret and the repo are named.
	var wrapperCM corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: runtimeNS, Name: controller.WrapperRuntimeConfigMap}, &wrapperCM); err != nil {
		t.Fatal(err)
	}
	wrapperCM.Data["image"] = wrapperImage
	if err := k8s.Update(ctx, &wrapperCM); err != nil {
		t.Fatal(err)
	}
	// An image, but a wrapper chart older than this operator's pods need: invalid, the feature and
	// the ConfigMap named.
	eventually(t, 20*time.Second, "Ready=False naming the wrapper image's missing feature", func() error {
		_, c = waitProjectReady(t, ns, "p", metav1.ConditionFalse, tatarav1.ReasonRuntimeConfigInvalid)
		if !strings.Contains(c.Message, agentpod.FeatureWorkspaceInit) || !strings.Contains(c.Message, controller.WrapperRuntimeConfigMap) {
			return fmt.Errorf("RuntimeConfigInvalid message %q does not name the feature %s of %s", c.Message, agentpod.FeatureWorkspaceInit, controller.WrapperRuntimeConfigMap)
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: runtimeNS, Name: controller.WrapperRuntimeConfigMap}, &wrapperCM); err != nil {
		t.Fatal(err)
	}
	wrapperCM.Data[agentpod.FeaturesKey] = runtimeFeatures[controller.WrapperRuntimeConfigMap]
	if err := k8s.Update(ctx, &wrapperCM); err != nil {
		t.Fatal(err)
	}
	_, c = waitProjectReady(t, ns, "p", metav1.ConditionFalse, tatarav1.ReasonRepoSecretMissing)
	if !strings.Contains(c.Message, `"demo-read"`) || !strings.Contains(c.Message, `repo "demo"`) {
		t.Errorf("RepoSecretMissing message %q does not name the Secret demo-read and the repo demo", c.Message)
	}

	// 4. The credentials Secret exists; the push Secret is next. Neither is watched: the recheck finds them.
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"token": []byte("t")}}
	}
	if err := k8s.Create(ctx, secret("demo-read")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the push Secret demo-push to be named", func() error {
		var p tatarav1.Project
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "p"}, &p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, tatarav1.ProjectConditionReady)
		if c == nil || c.Reason != tatarav1.ReasonRepoSecretMissing || !strings.Contains(c.Message, `"demo-push" (the push of repo "demo")`) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if err := k8s.Create(ctx, secret("demo-push")); err != nil {
		t.Fatal(err)
	}
	p, c := waitProjectReady(t, ns, "p", metav1.ConditionTrue, tatarav1.ReasonAgentPodsBuildable)
	if c.ObservedGeneration != p.Generation {
		t.Errorf("Ready observedGeneration %d, Project generation %d", c.ObservedGeneration, p.Generation)
	}

	// 5. A ConfigMap change that changes nothing for the Project enqueues it but leaves its status
	// as it was (no new resourceVersion: the condition, its time included, is not rewritten).
	before := p.ResourceVersion
	wrapperCM = corev1.ConfigMap{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: runtimeNS, Name: controller.WrapperRuntimeConfigMap}, &wrapperCM); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(wrapperCM.DeepCopy())
	wrapperCM.Labels = map[string]string{"touched": "yes"}
	if err := k8s.Patch(ctx, &wrapperCM, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	var after tatarav1.Project
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "p"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before {
		t.Errorf("an unchanged Ready condition was written again: resourceVersion %s -> %s, conditions %+v", before, after.ResourceVersion, after.Status.Conditions)
	}
}
