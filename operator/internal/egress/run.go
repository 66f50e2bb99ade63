package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

// reporterName is the Events' reporting controller.
const reporterName = "tatara-egress-proxy"

// run serves the proxy of f.project with a controller-runtime manager whose cache holds the one
// Project and the Project's agent pods of the one namespace, and nothing else.
func run(ctx context.Context, f flags, log *slog.Logger) error {
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load the Kubernetes client config: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), tatarav1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("failed to build the scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
		// Room for the proxy's own drain (Limits.ShutdownTimeout) to end first.
		GracefulShutdownTimeout: ptr.To(f.limits.withDefaults().ShutdownTimeout + 5*time.Second),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&tatarav1.Project{}: {Field: fields.OneTermEqualSelector("metadata.name", f.project)},
				&corev1.Pod{}:       {Label: labels.SelectorFromSet(AgentPodLabels(f.project)), Transform: slimPod},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodIPIndex, IndexPodIPs); err != nil {
		return fmt.Errorf("failed to index agent pods by address: %w", err)
	}
	m := NewMetrics(ctrlmetrics.Registry, f.project)
	policy := &allowlist.Policy{}
	pr := &ProjectReconciler{Client: mgr.GetClient(), Project: types.NamespacedName{Namespace: f.namespace, Name: f.project},
		Policy: policy, Metrics: m, Log: log}
	if err := pr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to watch the Project: %w", err)
	}
	proxy := New(Config{
		Project: f.project, Namespace: f.namespace, Policy: policy,
		Identify: &PodIdentities{Reader: mgr.GetCache(), Namespace: f.namespace, Project: f.project},
		Events:   mgr.GetEventRecorder(reporterName), Metrics: m, Log: log, Limits: f.limits,
		Forbidden: append(allowlist.ForbiddenPrefixes(), f.denied...),
	})
	// Listening before the manager starts makes a taken port fail the command at once.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("failed to listen on %q: %w", f.listen, err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return proxy.Serve(ctx, ln) })); err != nil {
		_ = ln.Close()
		return fmt.Errorf("failed to add the proxy: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping),
		mgr.AddReadyzCheck("project", func(*http.Request) error {
			if !proxy.Ready() {
				return fmt.Errorf("the Project %s/%s has not been read yet: every request is refused", f.namespace, f.project)
			}
			return nil
		})); err != nil {
		return fmt.Errorf("failed to add health checks: %w", err)
	}
	return mgr.Start(ctx)
}

// slimPod keeps of an agent pod what identifies it (PodIdentities): a busy Project's pods
// cost the cache a few hundred bytes each instead of their whole spec.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			Labels: pod.Labels, OwnerReferences: pod.OwnerReferences,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs},
	}, nil
}
