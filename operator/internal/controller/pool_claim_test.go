package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestWarmPoolFor: which Tasks may take a pod from their Project's pool. Another ref than the
// pool's checkout needs a git gateway to fetch it through and images that handle the claim's ref.
func TestWarmPoolFor(t *testing.T) {
	project := func(push bool) *tatarav1.Project {
		p := &tatarav1.Project{Spec: tatarav1.ProjectSpec{
			Repos:    []tatarav1.ProjectRepo{{Name: "r", URL: "https://git.example.test/r.git", DefaultBranch: "main"}},
			WarmPool: []tatarav1.WarmPool{{Kind: tatarav1.KindImplement, Size: 1, Repo: "r"}},
		}}
		if push {
			p.Spec.Repos[0].Push = &tatarav1.RepoPush{SecretName: "push"}
		}
		return p
	}
	task := func(kind tatarav1.TaskKind, repo, ref string) *tatarav1.Task {
		return &tatarav1.Task{Spec: tatarav1.TaskSpec{Kind: kind, Repo: repo, Ref: ref}}
	}
	tests := []struct {
		name       string
		project    *tatarav1.Project
		task       *tatarav1.Task
		fetchesRef bool
		want       bool
	}{
		{"the pool's checkout", project(false), task(tatarav1.KindImplement, "r", ""), false, true},
		{"its default branch named", project(false), task(tatarav1.KindImplement, "r", "main"), false, true},
		{"another kind", project(true), task(tatarav1.KindReview, "r", ""), true, false},
		{"another repo", project(true), task(tatarav1.KindImplement, "", ""), true, false},
		{"another ref, push, images fetch", project(true), task(tatarav1.KindImplement, "r", "feature"), true, true},
		{"another ref, no push", project(false), task(tatarav1.KindImplement, "r", "feature"), true, false},
		{"another ref, images predate the fetch", project(true), task(tatarav1.KindImplement, "r", "feature"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := warmPoolFor(tt.project, tt.task, tt.fetchesRef); got != tt.want {
				t.Errorf("warmPoolFor = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestClaimFetchesRefNeedsBothImages: the pods' claims may carry a ref only when the cli's and the
// wrapper's runtime ConfigMaps both list agentpod.FeatureClaimRef.
func TestClaimFetchesRefNeedsBothImages(t *testing.T) {
	tests := []struct {
		name         string
		cli, wrapper string // their features, besides the wrapper's required workspace-init
		want         bool
	}{
		{"both", agentpod.FeatureClaimRef, agentpod.FeatureClaimRef, true},
		{"an older cli chart", "", agentpod.FeatureClaimRef, false},
		{"an older wrapper chart", agentpod.FeatureClaimRef, "", false},
		{"neither", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := func(name, features string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tatara-system"},
					Data: map[string]string{ImageKey: name + ":1", agentpod.FeaturesKey: features}}
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
				WithObjects(cm(CLIRuntimeConfigMap, tt.cli), cm(WrapperRuntimeConfigMap, tt.wrapper+","+agentpod.FeatureWorkspaceInit)).Build()
			cfg, _, err := agentConfig(context.Background(), c, Config{RuntimeNamespace: "tatara-system"})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClaimFetchesRef != tt.want {
				t.Errorf("ClaimFetchesRef = %v, want %v", cfg.ClaimFetchesRef, tt.want)
			}
		})
	}
}

// TestRuntimeConfigNeedsTheWrapperFeatures: a wrapper chart that predates the pod layout this
// operator builds (no workspace-init feature) is an invalid runtime config naming the feature and
// the chart version, never a pod that fails; the cli's needs none.
func TestRuntimeConfigNeedsTheWrapperFeatures(t *testing.T) {
	tests := []struct {
		name, wrapperFeatures, wantErr string
	}{
		{"the feature", agentpod.FeatureWorkspaceInit, ""},
		{"among others", agentpod.FeatureClaimRef + "," + agentpod.FeatureWorkspaceInit, ""},
		{"an older wrapper chart", "", `lists no feature "workspace-init" under key "features"`},
		{"a near miss", "workspace-init2", `lists no feature "workspace-init"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: CLIRuntimeConfigMap, Namespace: "ns"}, Data: map[string]string{ImageKey: "cli:1"}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: WrapperRuntimeConfigMap, Namespace: "ns"},
					Data: map[string]string{ImageKey: "wrapper:1", agentpod.FeaturesKey: tt.wrapperFeatures}}).Build()
			_, reason, err := agentConfig(context.Background(), c, Config{RuntimeNamespace: "ns"})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || reason != tatarav1.ReasonRuntimeConfigInvalid || !strings.Contains(err.Error(), tt.wantErr) ||
				!strings.Contains(err.Error(), WrapperRuntimeConfigMap) || !strings.Contains(err.Error(), "tatara-wrapper 0.6.0") {
				t.Fatalf("reason %q, error %v; want RuntimeConfigInvalid naming the ConfigMap, %s and the chart version", reason, err, tt.wantErr)
			}
		})
	}
}
