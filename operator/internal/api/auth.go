package api

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/token"
)

// authenticate maps the bearer token to its Task through the token Secret's hash index.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*tatarav1.Task, *apiError) {
	tok, ok := token.FromAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return nil, errorf(http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <TATARA_TOKEN>")
	}
	var secrets corev1.SecretList
	if err := s.opts.Client.List(ctx, &secrets, client.MatchingFields{index.SecretTokenHash: token.Hash(tok)}); err != nil {
		return nil, errorf(http.StatusInternalServerError, "failed to look up token: %v", err)
	}
	if len(secrets.Items) != 1 {
		return nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	sec := secrets.Items[0]
	owner := metav1.GetControllerOf(&sec)
	if owner == nil || owner.Kind != "Task" {
		return nil, errorf(http.StatusUnauthorized, "invalid token")
	}
	var task tatarav1.Task
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: sec.Namespace, Name: owner.Name}, &task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusUnauthorized, "invalid token: its task no longer exists")
		}
		return nil, errorf(http.StatusInternalServerError, "failed to get task %q: %v", owner.Name, err)
	}
	// A Task deleted and recreated under the same name must not inherit an old token.
	if task.UID != owner.UID {
		return nil, errorf(http.StatusUnauthorized, "invalid token: its task no longer exists")
	}
	return &task, nil
}
