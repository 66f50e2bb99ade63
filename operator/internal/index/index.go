// Package index registers the cache field indexes the controller and the REST API look
// objects up by: Secrets by token hash, Tasks by project and by parent.
package index

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/token"
)

// Field index names.
const (
	// SecretTokenHash indexes the operator's token Secrets by token.Hash of their token, so the
	// REST API finds a caller's Task without keeping tokens in clear as index keys.
	SecretTokenHash = "tatara.dev/token-sha256"
	// TaskProject indexes Tasks by spec.projectRef.name.
	TaskProject = "spec.projectRef.name"
	// TaskParent indexes Tasks by spec.parent.
	TaskParent = "spec.parent"
)

// Register adds the indexes to the manager's cache.
func Register(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &corev1.Secret{}, SecretTokenHash, func(o client.Object) []string {
		s := o.(*corev1.Secret)
		tok, ok := s.Data[agent.TokenKey]
		if s.Labels[agent.LabelManagedBy] != agent.ManagedByValue || !ok || len(tok) == 0 {
			return nil
		}
		return []string{token.Hash(string(tok))}
	}); err != nil {
		return fmt.Errorf("failed to index secrets by %q: %w", SecretTokenHash, err)
	}
	if err := idx.IndexField(ctx, &tatarav1.Task{}, TaskProject, func(o client.Object) []string {
		return []string{o.(*tatarav1.Task).Spec.ProjectRef.Name}
	}); err != nil {
		return fmt.Errorf("failed to index tasks by %q: %w", TaskProject, err)
	}
	if err := idx.IndexField(ctx, &tatarav1.Task{}, TaskParent, func(o client.Object) []string {
		if p := o.(*tatarav1.Task).Spec.Parent; p != "" {
			return []string{p}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index tasks by %q: %w", TaskParent, err)
	}
	return nil
}
