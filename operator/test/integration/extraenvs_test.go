package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// TestExtraEnvsCannotRedirectTheAgent: a Project's extraEnvs reach both agent containers last, so
// the CRD itself refuses the Tatara variables that carry the Task's identity, token and backends
// (a Project author could otherwise read another Task's token Secret into TATARA_TOKEN, or point
// TATARA_OPERATOR_URL anywhere), HOME and the wrapper's state dir (set into the workspace, they
// would let the repository configure the agent CLI), and any valueFrom but a Secret or ConfigMap
// key.
func TestExtraEnvsCannotRedirectTheAgent(t *testing.T) {
	ns := newNamespace(t)
	secretRef := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: agent.SecretName("victim")}, Key: "token"}}
	tests := []struct {
		name    string
		env     corev1.EnvVar
		wantErr string // "" = accepted
	}{
		{"another Task's token", corev1.EnvVar{Name: "TATARA_TOKEN", ValueFrom: secretRef}, "may not set TATARA_*"},
		{"the operator's address", corev1.EnvVar{Name: "TATARA_OPERATOR_URL", Value: "http://attacker.example.test"}, "may not set TATARA_*"},
		{"the chat backend", corev1.EnvVar{Name: "TATARA_CHAT_URL", Value: "http://attacker.example.test"}, "may not set TATARA_*"},
		{"the Task's identity", corev1.EnvVar{Name: "TATARA_TASK", Value: "victim"}, "may not set TATARA_*"},
		{"a field of the pod", corev1.EnvVar{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}, "only be a secretKeyRef or a configMapKeyRef"},
		{"the documented profile override", corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: "review"}, ""},
		{"a wrapper setting", corev1.EnvVar{Name: "TATARA_WRAPPER_LINGER", Value: "1m"}, ""},
		{"the wrapper's state dir", corev1.EnvVar{Name: "TATARA_WRAPPER_STATE_DIR", Value: "/workspace/r"}, "may not set HOME or TATARA_WRAPPER_STATE_DIR"},
		{"the agent's HOME", corev1.EnvVar{Name: "HOME", Value: "/workspace/r"}, "may not set HOME or TATARA_WRAPPER_STATE_DIR"},
		{"the agent's HOME from a ConfigMap", corev1.EnvVar{Name: "HOME", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "home"}}}, "may not set HOME or TATARA_WRAPPER_STATE_DIR"},
		{"a model key from a Secret", corev1.EnvVar{Name: "ANTHROPIC_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "model"}, Key: "key"}}}, ""},
		{"another Task's token under another name", corev1.EnvVar{Name: "GH_TOKEN", ValueFrom: secretRef}, "may not read a Task's token Secret"},
		{"a value from a ConfigMap", corev1.EnvVar{Name: "REGION", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "region"}}}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("env-%d", i), Namespace: ns},
				Spec: tatarav1.ProjectSpec{Agent: tatarav1.ProjectAgent{ExtraEnvs: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}, tt.env}}}}
			err := k8s.Create(context.Background(), p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want refused with %q, got %v", tt.wantErr, err)
			}
		})
	}
}

// TestRepoSecretsCannotBeTokenSecrets: a repo's credentials and push Secrets are mounted into the
// agent pod's workspace-init and git-gateway containers, so neither may name a Task's token Secret
// (agent.SecretName): a Project author could otherwise have another Task's token sent to any git
// host as a password.
func TestRepoSecretsCannotBeTokenSecrets(t *testing.T) {
	ns := newNamespace(t)
	tokenSecret := agent.SecretName("victim")
	for i, tt := range []struct {
		name    string
		repo    tatarav1.ProjectRepo
		wantErr string
	}{
		{"credentials", tatarav1.ProjectRepo{Name: "r", URL: "https://git.example.test/r.git", Credentials: &tatarav1.RepoCredentials{SecretName: tokenSecret}}, "may not name a Task's token Secret"},
		{"push", tatarav1.ProjectRepo{Name: "r", URL: "https://git.example.test/r.git", Push: &tatarav1.RepoPush{SecretName: tokenSecret}}, "may not name a Task's token Secret"},
		{"a repo Secret", tatarav1.ProjectRepo{Name: "r", URL: "https://git.example.test/r.git", Credentials: &tatarav1.RepoCredentials{SecretName: "git-read"}, Push: &tatarav1.RepoPush{SecretName: "git-push"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("repo-%d", i), Namespace: ns},
				Spec: tatarav1.ProjectSpec{Repos: []tatarav1.ProjectRepo{tt.repo}}}
			err := k8s.Create(context.Background(), p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want refused with %q, got %v", tt.wantErr, err)
			}
		})
	}
}
