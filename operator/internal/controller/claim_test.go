package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"tatara.dev/cli/pkg/claim"
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
// wrapper's runtime ConfigMaps both list claim.FeatureRef.
func TestClaimFetchesRefNeedsBothImages(t *testing.T) {
	tests := []struct {
		name         string
		cli, wrapper string // claimFeatures values; "-" for no key
		want         bool
	}{
		{"both", claim.FeatureRef, claim.FeatureRef, true},
		{"among others", "x," + claim.FeatureRef, claim.FeatureRef + ",y", true},
		{"an older cli chart", "-", claim.FeatureRef, false},
		{"an older wrapper chart", claim.FeatureRef, "-", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := func(name, features string) *corev1.ConfigMap {
				c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tatara-system"}, Data: map[string]string{ImageKey: name + ":1"}}
				if features != "-" {
					c.Data[claim.FeaturesKey] = features
				}
				return c
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
				WithObjects(cm(CLIRuntimeConfigMap, tt.cli), cm(WrapperRuntimeConfigMap, tt.wrapper)).Build()
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
