// Package index registers the cache field indexes the controller and the REST API look
// objects up by: Tasks by token hash, by project and by parent.
package index

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// Field index names.
const (
	// TaskTokenHash indexes Tasks by status.tokenHash, the token.Hash of the token the operator
	// minted for them (only the operator writes it, through the status subresource), so the REST
	// API finds a caller's Task without keeping tokens in clear as index keys.
	TaskTokenHash = "status.tokenHash"
	// TaskProject indexes Tasks by spec.projectRef.name.
	TaskProject = "spec.projectRef.name"
	// TaskParent indexes Tasks by spec.parent.
	TaskParent = "spec.parent"
)

// Register adds the indexes to the manager's cache.
func Register(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &tatarav1.Task{}, TaskTokenHash, func(o client.Object) []string {
		if h := o.(*tatarav1.Task).Status.TokenHash; h != "" {
			return []string{h}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index tasks by %q: %w", TaskTokenHash, err)
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
