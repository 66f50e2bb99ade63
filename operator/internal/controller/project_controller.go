package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// RepoSecretRecheck is how often a Project whose repo or model Secret is missing looks again: the operator
// caches only its own Secrets, so it cannot watch for the one a user creates.
const RepoSecretRecheck = 30 * time.Second

// ProjectReconciler keeps each Project's Ready condition: whether the operator can build its agent
// pods now (the runtime ConfigMaps, and the Secrets its repos name). It writes the status only when
// the condition changes.
type ProjectReconciler struct {
	client.Client
	// APIReader reads Secrets' metadata around the cache, which holds only the operator's own.
	APIReader client.Reader
	Config    Config
	// SecretRecheck replaces RepoSecretRecheck when set.
	SecretRecheck time.Duration
}

// +kubebuilder:rbac:groups=tatara.dev,resources=projects/status,verbs=get;update;patch

// Reconcile sets the Project's Ready condition.
func (r *ProjectReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var project tatarav1.Project
	if err := r.Get(ctx, req.NamespacedName, &project); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !project.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	status, reason, msg, err := r.readiness(ctx, &project)
	if err != nil {
		return ctrl.Result{}, err
	}
	orig := project.DeepCopy()
	setModelKeyVisible(&project)
	setOpenEgress(&project)
	meta.SetStatusCondition(&project.Status.Conditions, metav1.Condition{
		Type: tatarav1.ProjectConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: project.Generation,
	})
	if !equality.Semantic.DeepEqual(orig.Status, project.Status) {
		if err := r.Status().Patch(ctx, &project, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: conflictRequeue}, nil
			}
			return ctrl.Result{}, fmt.Errorf("failed to patch status of project %q: %w", project.Name, err)
		}
	}
	if reason == tatarav1.ReasonRepoSecretMissing || reason == tatarav1.ReasonModelSecretMissing {
		recheck := r.SecretRecheck
		if recheck <= 0 {
			recheck = RepoSecretRecheck
		}
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	return ctrl.Result{}, nil
}

// readiness is the Ready condition's status, reason and message: False with the first thing
// missing, in the order an agent pod needs them (runtime ConfigMaps, then each repo's Secrets).
// Secrets are read as metadata only: their data is never fetched.
func (r *ProjectReconciler) readiness(ctx context.Context, project *tatarav1.Project) (metav1.ConditionStatus, string, string, error) {
	var res agent.Resources
	for _, cm := range []string{CLIRuntimeConfigMap, WrapperRuntimeConfigMap} {
		if _, reason, err := readRuntimeConfig(ctx, r.Client, r.Config.RuntimeNamespace, cm, &res); err != nil {
			if reason == "" {
				return "", "", "", err
			}
			return metav1.ConditionFalse, reason, err.Error(), nil
		}
	}
	if m := project.Spec.Agent.Model; m != nil {
		cfg, reason, err := agentConfig(ctx, r.Client, r.Config)
		if err != nil && reason == "" {
			return "", "", "", err
		}
		if err == nil && !cfg.ModelGateway {
			return metav1.ConditionFalse, tatarav1.ReasonRuntimeConfigInvalid, modelGatewayMissing(), nil
		}
		found, err := r.secretExists(ctx, project.Namespace, m.SecretName)
		if err != nil {
			return "", "", "", err
		}
		if !found {
			return metav1.ConditionFalse, tatarav1.ReasonModelSecretMissing,
				fmt.Sprintf("secret %q (spec.agent.model's credential) not found in namespace %q: create it, or no agent pod can start", m.SecretName, project.Namespace), nil
		}
	}
	for _, repo := range project.Spec.Repos {
		for _, s := range []struct {
			use, name string
		}{{"credentials", secretName(repo.Credentials)}, {"push", pushSecretName(repo.Push)}} {
			if s.name == "" {
				continue
			}
			found, err := r.secretExists(ctx, project.Namespace, s.name)
			if err != nil {
				return "", "", "", err
			}
			if !found {
				return metav1.ConditionFalse, tatarav1.ReasonRepoSecretMissing,
					fmt.Sprintf("secret %q (the %s of repo %q) not found in namespace %q: create it, or agent pods of Tasks on that repo cannot start",
						s.name, s.use, repo.Name, project.Namespace), nil
			}
		}
	}
	return metav1.ConditionTrue, tatarav1.ReasonAgentPodsBuildable,
		fmt.Sprintf("runtime ConfigMaps %s and %s are valid and every repo Secret exists", CLIRuntimeConfigMap, WrapperRuntimeConfigMap), nil
}

// modelGatewayMissing says why a Project with spec.agent.model gets no pods from this cli image.
func modelGatewayMissing() string {
	return fmt.Sprintf("spec.agent.model needs the model gateway, and configmap %s lists no feature %q under key %q: roll the tatara-cli chart forward",
		CLIRuntimeConfigMap, agentpod.FeatureModelGateway, agentpod.FeaturesKey)
}

// setModelKeyVisible sets the Project's ModelKeyVisible condition: True while its extraEnvs hand
// the agent a model credential.
func setModelKeyVisible(project *tatarav1.Project) {
	var visible []string
	for _, e := range project.Spec.Agent.ExtraEnvs {
		if slices.Contains(agent.ModelCredentialEnvs, e.Name) {
			visible = append(visible, e.Name)
		}
	}
	c := metav1.Condition{Type: tatarav1.ProjectConditionModelKeyVisible, ObservedGeneration: project.Generation}
	switch {
	case len(visible) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, tatarav1.ReasonModelKeyInExtraEnvs
		c.Message = fmt.Sprintf("spec.agent.extraEnvs sets %s: the agent, and every command it runs, can read the model credential and send it anywhere; name it in spec.agent.model instead",
			strings.Join(visible, ", "))
	case project.Spec.Agent.Model != nil:
		c.Status, c.Reason = metav1.ConditionFalse, tatarav1.ReasonModelGateway
		c.Message = "the model credential is only in each agent pod's model gateway"
	default:
		meta.RemoveStatusCondition(&project.Status.Conditions, tatarav1.ProjectConditionModelKeyVisible)
		return
	}
	meta.SetStatusCondition(&project.Status.Conditions, c)
}

// setOpenEgress sets the Project's OpenEgress condition: whether its agent pods reach the outside
// of the cluster directly, only through its egress proxy, or as the namespace's NetworkPolicies
// allow (spec.egress unset).
func setOpenEgress(project *tatarav1.Project) {
	c := metav1.Condition{Type: tatarav1.ProjectConditionOpenEgress, ObservedGeneration: project.Generation}
	switch e := project.Spec.Egress; {
	case e == nil:
		c.Status, c.Reason = metav1.ConditionUnknown, tatarav1.ReasonEgressNotConfigured
		c.Message = "spec.egress is unset: agent pods get no egress proxy, and what they reach outside the cluster is whatever the namespace's NetworkPolicies allow"
	case e.Mode == tatarav1.EgressOpen:
		c.Status, c.Reason = metav1.ConditionTrue, tatarav1.ReasonEgressOpen
		c.Message = "spec.egress.mode is Open: agent pods connect to any public address directly, so whatever an agent reads it can send anywhere"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, tatarav1.ReasonEgressProxy
		c.Message = fmt.Sprintf("agent pods reach the outside only through the egress proxy %s, which lets through spec.egress.allow (%d entries), the repos' hosts and the model upstream",
			e.ProxyURL, len(e.Allow))
	}
	meta.SetStatusCondition(&project.Status.Conditions, c)
}

func secretName(c *tatarav1.RepoCredentials) string {
	if c == nil {
		return ""
	}
	return c.SecretName
}

func pushSecretName(p *tatarav1.RepoPush) string {
	if p == nil {
		return ""
	}
	return p.SecretName
}

// secretExists GETs the Secret's metadata only (PartialObjectMetadata): never its data.
func (r *ProjectReconciler) secretExists(ctx context.Context, namespace, name string) (bool, error) {
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &m)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to get metadata of secret %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

// SetupWithManager registers the controller: Projects, and the runtime ConfigMaps every
// Project's readiness depends on.
func (r *ProjectReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&tatarav1.Project{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(projects(r.Client, func(*tatarav1.Project) bool { return true })),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Config.isRuntimeConfigMap))).
		Named("project").
		WithOptions(opts).
		Complete(r)
}

// projects maps any event to a request for each Project that keep accepts.
func projects(c client.Reader, keep func(*tatarav1.Project) bool) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list tatarav1.ProjectList
		if err := c.List(ctx, &list); err != nil {
			logf.FromContext(ctx).Error(err, "failed to list projects")
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if keep(&list.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	}
}
