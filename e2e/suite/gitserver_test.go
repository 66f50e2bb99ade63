//go:build e2e

package suite

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

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

	"tatara.dev/testkit/gitserver"
)

// The e2e git server (cmd/git-server): bare repositories over git's smart HTTP protocol in the
// model stand-in's namespace, the demo repository created at start. Clones and fetches need the
// read token, pushes the write token (HTTP Basic password, any user name); both live in the
// Secret gitServerSecret under the keys read-token and write-token.
const (
	gitServerNamespace = modelNamespace
	gitServerName      = "git-server"
	gitServerSecret    = "git-server-tokens"
	gitServerPort      = 8080
	gitServerImageName = "tatara-git-server"
)

// The git server's tokens: random, generated once per suite run.
var (
	gitReadToken  = rand.Text()
	gitWriteToken = rand.Text()
)

// keptGitTokens reads the tokens of the git server a kept cluster runs (E2E_KEEP_CLUSTER=1), so
// that this run's Secrets and checks use them instead of new ones.
func keptGitTokens(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	var sec corev1.Secret
	if err := cfg.Client().Resources().Get(ctx, gitServerSecret, gitServerNamespace, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return ctx, nil // the earlier run stopped before it deployed the git server
		}
		return ctx, fmt.Errorf("failed to read the kept git server's tokens: %w", err)
	}
	read, write := string(sec.Data["read-token"]), string(sec.Data["write-token"])
	if read == "" || write == "" {
		return ctx, fmt.Errorf("secret %s/%s lacks read-token or write-token", gitServerNamespace, gitServerSecret)
	}
	gitReadToken, gitWriteToken = read, write
	return ctx, nil
}

// gitServerURL is the in-cluster clone URL of a repository of the git server.
func gitServerURL(repo string) string {
	return fmt.Sprintf("http://%s.%s.svc:%d/%s.git", gitServerName, gitServerNamespace, gitServerPort, repo)
}

// imageRepository is an image reference without its tag.
func imageRepository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// deployGitServer runs the git server image (the one of images whose repository ends in
// /tatara-git-server) as a Deployment and Service in the tatara-e2e namespace (created if
// missing), with the suite's tokens in a Secret, and waits until it is Available.
func deployGitServer(images []string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		i := slices.IndexFunc(images, func(img string) bool {
			return strings.HasSuffix(imageRepository(img), "/"+gitServerImageName)
		})
		if i < 0 {
			return ctx, fmt.Errorf("E2E_IMAGES has no %s image: %v", gitServerImageName, images)
		}
		r, err := resources.New(cfg.Client().RESTConfig())
		if err != nil {
			return ctx, err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gitServerNamespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted"}}}
		if err := r.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctx, fmt.Errorf("failed to create namespace %s: %w", gitServerNamespace, err)
		}
		labels := map[string]string{"app.kubernetes.io/name": gitServerName, "app.kubernetes.io/part-of": "tatara-e2e"}
		meta := metav1.ObjectMeta{Name: gitServerName, Namespace: gitServerNamespace, Labels: labels}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: gitServerSecret, Namespace: gitServerNamespace, Labels: labels},
			StringData: map[string]string{"read-token": gitReadToken, "write-token": gitWriteToken},
		}
		const tokens, repos = "/etc/git-server", "/srv/git"
		dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: gitServerName, Image: images[i], ImagePullPolicy: corev1.PullNever,
						Args: []string{"--listen", fmt.Sprintf(":%d", gitServerPort), "--root", repos, "--demo-repo", "demo",
							"--read-token-file", tokens + "/read-token", "--write-token-file", tokens + "/write-token"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: gitServerPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/healthz", Port: intstr.FromInt32(gitServerPort)}}, PeriodSeconds: 1},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "tokens", MountPath: tokens, ReadOnly: true},
							{Name: "repos", MountPath: repos},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "tokens", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: gitServerSecret}}},
						{Name: "repos", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		}}
		svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: gitServerPort, TargetPort: intstr.FromInt32(gitServerPort)}}}}
		if err := createOrKeep(ctx, r, secret, dep, svc); err != nil {
			return ctx, err
		}
		if err := wait.For(conditions.New(r).DeploymentConditionMatch(dep, appsv1.DeploymentAvailable, corev1.ConditionTrue),
			wait.WithTimeout(waitTimeout)); err != nil {
			return ctx, fmt.Errorf("git server not Available: %w", err)
		}
		return ctx, nil
	}
}

// gitInspect GETs an inspection route of the git server (/-/<route>/<repo>) through the API
// server's service proxy, with the read token. The proxy drops the Authorization header of the
// requests it authenticates, so the token travels in gitserver.TokenHeader.
func gitInspect(ctx context.Context, cfg *envconf.Config, route, repo string, query url.Values) ([]byte, error) {
	if err := gitserver.ValidName("repository name", repo); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%d/proxy/-/%s/%s", gitServerNamespace, gitServerName, gitServerPort, route, repo)
	req := cs.CoreV1().RESTClient().Get().AbsPath(path).SetHeader(gitserver.TokenHeader, gitReadToken)
	for k, vs := range query {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s?%s: %w (%s)", path, query.Encode(), err, strings.TrimSpace(string(raw)))
	}
	return raw, nil
}

// gitBranches is the branches of a repository of the git server: name to commit.
func gitBranches(ctx context.Context, cfg *envconf.Config, repo string) (map[string]string, error) {
	raw, err := gitInspect(ctx, cfg, "branches", repo, nil)
	if err != nil {
		return nil, err
	}
	var out gitserver.Branches
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("branches of %s: %w", repo, err)
	}
	return out.Branches, nil
}

// gitShow is the content of a file on a branch of a repository of the git server.
func gitShow(ctx context.Context, cfg *envconf.Config, repo, ref, path string) ([]byte, error) {
	return gitInspect(ctx, cfg, "show", repo, url.Values{"ref": {ref}, "path": {path}})
}
