package egress

import (
	"context"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

// ProjectReconciler keeps the Policy in step with the watched Project: the allow-list is rebuilt
// when the Project's spec changes (never read per request), and dropped when it is deleted.
type ProjectReconciler struct {
	Client  client.Reader
	Project types.NamespacedName
	Policy  *allowlist.Policy
	Metrics *Metrics
	Log     *slog.Logger
}

// Reconcile rebuilds the allow-list from the Project.
func (r *ProjectReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.NamespacedName != r.Project {
		return ctrl.Result{}, nil
	}
	var p tatarav1.Project
	if err := r.Client.Get(ctx, r.Project, &p); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.Policy.Set(nil)
		r.Log.Warn("Project not found: every request is refused (no_project) until it exists",
			"project", r.Project.Name, "namespace", r.Project.Namespace)
		return ctrl.Result{}, nil
	}
	list, errs := NewAllowList(&p)
	for _, err := range errs {
		r.Log.Error("allow-list entry left out", "project", p.Name, "error", err.Error())
	}
	r.Metrics.InvalidAllowEntries.Set(float64(len(errs)))
	r.Policy.Set(list)
	r.Log.Info("allow-list loaded", "project", p.Name, "generation", p.Generation, "entries", list.Len(),
		"invalid", len(errs))
	return ctrl.Result{}, nil
}

// SetupWithManager watches the Project (the manager's cache holds only that one).
func (r *ProjectReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("egress-proxy-project").
		For(&tatarav1.Project{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
