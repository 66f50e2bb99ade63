// Package manager wires the operator together: the controller-runtime manager (metrics,
// health probes, leader election, cache scoping), the Task and Project controllers and the REST API.
// cmd/main.go only parses flags and calls New.
//
// Rollouts and leader failover: how agents' calls stay answered while operator pods come and go.
// This file owns the operator's side; the parts and where each lives:
//   - every replica serves the REST API (apiRunnable and rest.Server need no leader); only the
//     leader reconciles, and it hands its Lease over on a graceful stop
//     (LeaderElectionReleaseOnCancel, here);
//   - a replica is Ready once its API listens and its caches are synced (the readyz checks, here);
//     the chart's Deployment keeps old pods until a new one is Ready (maxUnavailable 0), sleeps in
//     preStop while the Service drops a pod, and a PodDisruptionBudget lets one replica go at a time
//     (charts/tatara-operator/templates/deployment.yaml and poddisruptionbudget.yaml);
//   - the cli retries a call the operator did not take, and GETs and keyed calls after a lost
//     connection or a 502/503/504 (cli/internal/backend/backend.go);
//   - a retried creating call has one effect on whichever replica it lands: its Idempotency-Key is
//     stored with what it created (the header in operator/internal/rest/idempotency.go, the key
//     kept by operator/internal/taskops).
//
// docs/packaging.md ("Operator upgrades while Tasks run") has the figures; e2e/suite/rollout_test.go
// (TestOperatorRollouts, TestLeaderFailover) proves 0 failed calls.
package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/apicert"
	"tatara.dev/operator/internal/controller"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/internalissue"
	"tatara.dev/operator/internal/metrics"
	"tatara.dev/operator/internal/rest"
	"tatara.dev/operator/internal/taskops"
)

// Name is the operator's name: event reporter, leader-election lease and managed-by label.
const Name = "tatara-operator"

// Options configure the operator.
type Options struct {
	// MetricsAddr serves /metrics ("0" disables), ProbeAddr /healthz and /readyz ("0" disables).
	MetricsAddr string
	ProbeAddr   string
	// APIAddr is the REST API's listen address; APIListener, when set, is used instead.
	APIAddr     string
	APIListener net.Listener
	// APITLSCertDir, when set, makes the REST API serve HTTPS with the tls.crt and tls.key of
	// this directory (a mounted kubernetes.io/tls Secret), reloaded when they change; its
	// ca.crt, if any, goes to agent pods as TATARA_OPERATOR_CA_BUNDLE. Empty is plain HTTP.
	APITLSCertDir string
	// APITLSSecret, when set, makes the REST API serve HTTPS with a CA and certificate the
	// operator issues itself and keeps in this Secret (apicert), its CA going to agent pods.
	// At most one of APITLSCertDir and APITLSSecret is set.
	APITLSSecret types.NamespacedName
	// LeaderElection enables leader election (the controller runs on one replica; every
	// replica serves the REST API).
	LeaderElection          bool
	LeaderElectionNamespace string
	// Controller holds the runtime ConfigMap namespace and the backend URLs.
	Controller controller.Config
	// AgentNamespaces are the namespaces of the Projects and Tasks the operator serves: its cache
	// (Tasks, Projects, agent pods, token Secrets) watches only these, so its RBAC can be Roles
	// there. Empty means every namespace (development: needs cluster-wide RBAC).
	AgentNamespaces []string
	// MaxBodyBytes bounds REST request bodies.
	MaxBodyBytes int64
	// APIRateLimit bounds each Task's REST requests (429 above); the zero value is no limit.
	APIRateLimit rest.RateLimit
	// InternalIssueRateLimit bounds each Task's internal-issue reports (429 above).
	InternalIssueRateLimit rest.RateLimit
	// InternalIssuesPerProject is the most InternalIssue records of one Project (0: the default).
	InternalIssuesPerProject int
	// APISourceRateLimit bounds each source address's REST requests before authentication.
	APISourceRateLimit rest.RateLimit
	// Registerer receives the operator's metrics; nil means controller-runtime's registry,
	// which /metrics serves.
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// MaxConcurrentReconciles is how many Tasks are reconciled in parallel (0: 1).
	MaxConcurrentReconciles int
	// PoolPodMaxAge and PoolFailureHold replace controller.PoolPodMaxAge and
	// controller.PoolFailureHold when set (tests).
	PoolPodMaxAge, PoolFailureHold time.Duration
	// SkipNameValidation allows several managers in one process (tests restarting the operator).
	SkipNameValidation bool
	// RepoSecretRecheck is how often a Project whose repo Secret is missing looks again (0:
	// controller.RepoSecretRecheck); tests shorten it.
	RepoSecretRecheck time.Duration
}

// Operator is a configured manager plus handles tests and main need.
type Operator struct {
	ctrl.Manager
	Metrics *metrics.Metrics
	API     *rest.Server
}

// Scheme returns the scheme with the core and Tatara types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("failed to add client-go types to scheme: %w", err)
	}
	if err := tatarav1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("failed to add tatara.dev/v1alpha1 to scheme: %w", err)
	}
	return s, nil
}

// New builds the operator on cfg.
func New(ctx context.Context, cfg *restclient.Config, opts Options) (*Operator, error) {
	if opts.Controller.RuntimeNamespace == "" {
		return nil, fmt.Errorf("failed to configure operator: the runtime ConfigMap namespace is empty")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if err := opts.APISourceRateLimit.Validate(); err != nil {
		return nil, fmt.Errorf("invalid --api-source-rate-limit/--api-source-rate-burst: %w", err)
	}
	if err := opts.APIRateLimit.Validate(); err != nil {
		return nil, fmt.Errorf("failed to configure the REST API: %w", err)
	}
	if err := opts.InternalIssueRateLimit.Validate(); err != nil {
		return nil, fmt.Errorf("invalid --internal-issue-rate-limit/--internal-issue-rate-burst: %w", err)
	}
	if opts.InternalIssuesPerProject < 0 {
		return nil, fmt.Errorf("invalid --internal-issues-per-project %d: want a number >= 1 (0: the default, %d)", opts.InternalIssuesPerProject, taskops.DefaultInternalIssuesPerProject)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	apiTLS, err := loadAPITLS(ctx, cfg, scheme, opts)
	if err != nil {
		return nil, err
	}
	if apiTLS != nil {
		opts.Controller.OperatorCABundle = apiTLS.CABundle
	}
	reg := opts.Registerer
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	managed := labels.SelectorFromSet(labels.Set{agent.LabelManagedBy: agent.ManagedByValue})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        Name + ".tatara.dev",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// main exits right after the manager stops, so handing the lease over at once is safe
		// and spares the next replica a full lease duration.
		LeaderElectionReleaseOnCancel: true,
		// Only the operator's own pods and Secrets are cached, only in the agent namespaces, and
		// ConfigMaps only in the runtime namespace: an operator watching a busy cluster must not
		// mirror every Secret, nor need RBAC to.
		Cache: cacheOptions(opts.AgentNamespaces, opts.Controller.RuntimeNamespace, managed),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	m := metrics.NewMetrics(reg)
	if err := reg.Register(internalissue.NewOpenCollector(mgr.GetClient(), opts.Log)); err != nil {
		return nil, fmt.Errorf("failed to register the open internal issues gauge: %w", err)
	}
	rec := mgr.GetEventRecorder(Name)

	r := &controller.TaskReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Metrics: m, Config: opts.Controller,
	}
	copts := ctrlcontroller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}
	if opts.SkipNameValidation {
		copts.SkipNameValidation = ptr.To(true)
	}
	if err := r.SetupWithManager(mgr, copts); err != nil {
		return nil, fmt.Errorf("failed to set up task controller: %w", err)
	}
	pr := &controller.ProjectReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Controller,
		SecretRecheck: opts.RepoSecretRecheck}
	if err := pr.SetupWithManager(mgr, copts); err != nil {
		return nil, fmt.Errorf("failed to set up project controller: %w", err)
	}
	pool := &controller.PoolReconciler{Client: mgr.GetClient(), Config: opts.Controller, Metrics: m, MaxAge: opts.PoolPodMaxAge, FailureHold: opts.PoolFailureHold}
	if err := pool.SetupWithManager(mgr, copts); err != nil {
		return nil, fmt.Errorf("failed to set up warm pool controller: %w", err)
	}

	apiOpts := rest.Options{
		Addr: opts.APIAddr, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec,
		Metrics: m, Log: opts.Log.With("component", "api"), MaxBodyBytes: opts.MaxBodyBytes,
		RateLimit: opts.APIRateLimit, SourceRateLimit: opts.APISourceRateLimit,
		InternalIssueRateLimit: opts.InternalIssueRateLimit, InternalIssuesPerProject: opts.InternalIssuesPerProject,
		LockNamespace: cmp.Or(opts.LeaderElectionNamespace, opts.Controller.RuntimeNamespace),
	}
	if apiTLS != nil {
		apiOpts.TLS = apiTLS.Config()
		// Every replica serves the API, so every replica watches its certificate (the watcher
		// needs no leader election).
		if err := mgr.Add(apiTLS.Source); err != nil {
			return nil, fmt.Errorf("failed to add the REST API's certificate watcher: %w", err)
		}
	}
	srv := rest.New(apiOpts)
	var runnable interface {
		Start(context.Context) error
	} = srv
	if opts.APIListener != nil {
		runnable = listenerRunnable{srv: srv, ln: opts.APIListener}
	}
	if err := mgr.Add(apiRunnable{runnable}); err != nil {
		return nil, fmt.Errorf("failed to add REST API server: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add healthz check: %w", err)
	}
	// Ready means what an agent's call needs: the REST API accepts, and the caches it reads Tasks
	// and Projects from are synced. A rollout then moves traffic to a new pod only once it
	// answers.
	if err := mgr.AddReadyzCheck("rest-api", srv.Serving); err != nil {
		return nil, fmt.Errorf("failed to add readyz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return nil, fmt.Errorf("failed to add readyz check: %w", err)
	}
	return &Operator{Manager: mgr, Metrics: m, API: srv}, nil
}

// cacheSynced is a readiness check: nil once every informer of c has synced.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches are not synced")
		}
		return nil
	}
}

// loadAPITLS loads the REST API's certificate from the mounted Secret directory, or issues the
// operator's own into its Secret (nil when TLS is off). The URL agent pods get must then be https:
// over http the cli would send its Task token to a TLS port in clear, and fail on every call.
func loadAPITLS(ctx context.Context, cfg *restclient.Config, scheme *runtime.Scheme, opts Options) (*rest.TLS, error) {
	dir, secret := opts.APITLSCertDir, opts.APITLSSecret
	if dir == "" && secret.Name == "" {
		return nil, nil
	}
	if dir != "" && secret.Name != "" {
		return nil, fmt.Errorf("failed to configure REST API TLS: both a certificate directory (%s) and a Secret to issue into (%s) are set; choose one", dir, secret)
	}
	u, err := url.Parse(opts.Controller.OperatorURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("failed to configure REST API TLS: the operator URL given to agent pods, %q, is not an https URL with a host", opts.Controller.OperatorURL)
	}
	if dir != "" {
		return rest.LoadTLS(dir)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the REST API's certificate Secret: %w", err)
	}
	issuer := &apicert.Issuer{Client: c, Secret: secret, Hosts: []string{u.Hostname()}, Log: opts.Log.With("component", "api-tls")}
	if err := issuer.Ensure(ctx); err != nil {
		return nil, err
	}
	return &rest.TLS{Source: issuer, CABundle: issuer.CABundle}, nil
}

// cacheOptions scopes the cache: every object to agentNamespaces (all namespaces when empty),
// pods and Secrets further to the operator's label, ConfigMaps to runtimeNamespace alone, nodes
// (cluster-scoped) to their Ready condition. It
// strips managedFields from everything it holds, and pods to what the operator reads (trimPod).
func cacheOptions(agentNamespaces []string, runtimeNamespace string, managed labels.Selector) cache.Options {
	var defaults map[string]cache.Config
	for _, ns := range agentNamespaces {
		if defaults == nil {
			defaults = map[string]cache.Config{}
		}
		defaults[ns] = cache.Config{}
	}
	return cache.Options{
		DefaultNamespaces: defaults,
		// managedFields is the largest part of a small object and the operator never reads it;
		// an update sent without it leaves the API server's copy as it is.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Label: managed},
			&corev1.Pod{}:       {Label: managed, Transform: trimPod},
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{runtimeNamespace: {}}},
			// Cluster-scoped: every node, each kept as its name and Ready condition (trimNode).
			&corev1.Node{}: {Transform: trimNode},
		},
	}
}

// trimNode keeps of a node what the operator reads: its name and uid and its Ready condition,
// which says when its agent pods are lost (controller/node_lost.go). A node's images, addresses,
// capacity and other conditions are most of its memory, in clusters of thousands of nodes.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion,
	}}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{c}
		}
	}
	return out, nil
}

// trimPod keeps of a pod what the operator reads from its cache: the metadata (without
// managedFields), the status, and of the spec the active deadline, the node, and the containers'
// names and restart policies (which init containers are sidecars). The rest of the spec (env,
// volumes, security contexts, resources) is most of a pod's memory and is never read back: the
// builder writes it, and the only write of a cached pod is a merge patch, which carries just
// what changed. Code that needs more of a pod's spec reads it from the API server.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	spec := corev1.PodSpec{ActiveDeadlineSeconds: pod.Spec.ActiveDeadlineSeconds, NodeName: pod.Spec.NodeName}
	for _, c := range pod.Spec.InitContainers {
		spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	for _, c := range pod.Spec.Containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name})
	}
	pod.Spec = spec
	pod.ManagedFields = nil
	return pod, nil
}

// ParseNamespaces splits a comma-separated --agent-namespaces value, dropping blanks and
// duplicates; "" gives nil (every namespace).
func ParseNamespaces(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(s, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		out = append(out, ns)
	}
	return out
}

type listenerRunnable struct {
	srv *rest.Server
	ln  net.Listener
}

func (l listenerRunnable) Start(ctx context.Context) error { return l.srv.Serve(ctx, l.ln) }

// apiRunnable serves on every replica, leader or not.
type apiRunnable struct {
	r interface{ Start(context.Context) error }
}

func (a apiRunnable) Start(ctx context.Context) error { return a.r.Start(ctx) }
func (a apiRunnable) NeedLeaderElection() bool        { return false }
