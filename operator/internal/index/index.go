// Package index registers the cache field indexes the controller and the REST API look
// objects up by: Tasks by token hash, by project and by parent; token Secrets by the hashes of
// their audience tokens.
package index

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/tasktoken"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/token"
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
	// TaskPhase is status.phase. Like TaskProject and TaskParent it is a selectable field of the
	// Task CRD, so a List from the API server can select by it (a field selector); it is no
	// cache index.
	TaskPhase = "status.phase"
	// SecretAudienceToken indexes token Secrets by AudienceTokenKey of each audience token the
	// cli derives from theirs (tasktoken.ForAudience), so a backend's token review finds the
	// Task token it was derived from, again without tokens in clear as index keys.
	SecretAudienceToken = "audienceToken"
	// PodNode indexes the cached (agent and pool) pods by the node they are bound to: the pods a
	// node's loss ends.
	PodNode = "spec.nodeName"
)

// AudienceTokenKey is the SecretAudienceToken key of an audience token: the audience and the
// token's hash.
func AudienceTokenKey(audience, audienceToken string) string {
	return audience + "/" + token.Hash(audienceToken)
}

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
	if err := idx.IndexField(ctx, &corev1.Pod{}, PodNode, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index pods by %q: %w", PodNode, err)
	}
	if err := idx.IndexField(ctx, &corev1.Secret{}, SecretAudienceToken, func(o client.Object) []string {
		tok := string(o.(*corev1.Secret).Data[agent.TokenKey])
		if !tasktoken.Valid(tok) {
			return nil // not a token Secret
		}
		keys := make([]string, 0, len(tasktoken.Audiences))
		for _, aud := range tasktoken.Audiences {
			keys = append(keys, AudienceTokenKey(aud, tasktoken.ForAudience(tok, aud)))
		}
		return keys
	}); err != nil {
		return fmt.Errorf("failed to index secrets by %q: %w", SecretAudienceToken, err)
	}
	return nil
}
