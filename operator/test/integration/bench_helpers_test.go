//go:build scale || restload

package integration

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// deleteBenchNamespaces deletes what a benchmark run left in its namespaces: envtest has no
// garbage collector, so the pods and token Secrets the Tasks own stay unless deleted, and the next
// run's operator would cache them.
func deleteBenchNamespaces(t *testing.T, namespaces []string) {
	ctx := context.Background()
	for _, ns := range namespaces {
		for _, o := range []client.Object{&tatarav1.Task{}, &corev1.Pod{}, &corev1.Secret{}, &tatarav1.Project{}} {
			if err := k8s.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil {
				t.Errorf("failed to delete %T in %s: %v", o, ns, err)
			}
		}
		if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Errorf("failed to delete namespace %s: %v", ns, err)
		}
	}
}

// verbResource names a request the way API server audit logs do: "get pods", "patch tasks/status".
func verbResource(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "discovery"
	}
	if len(parts) == 0 {
		return "discovery"
	}
	if parts[0] == "namespaces" && len(parts) >= 3 {
		parts = parts[2:]
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := map[string]string{
		http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
	}[req.Method]
	switch {
	case req.Method == http.MethodGet && named:
		verb = "get"
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb = "watch"
	case req.Method == http.MethodGet:
		verb = "list"
	case req.Method == http.MethodDelete && !named:
		verb = "deletecollection"
	}
	return verb + " " + resource
}

// apiCounter counts the operator's requests to the API server by verb, resource and, for an
// answer that is not 2xx, its code (a 409 is a conflict the status writes retry), and when the
// latest was sent.
type apiCounter struct {
	mu     sync.Mutex
	counts map[string]int64
	last   atomic.Int64 // unix nanoseconds of the latest request
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.last.Store(time.Now().UnixNano())
		resp, err := rt.RoundTrip(req)
		key := verbResource(req)
		switch {
		case err != nil:
			key += " (transport error)"
		case resp.StatusCode >= 300:
			key += " " + strconv.Itoa(resp.StatusCode)
		}
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
		return resp, err
	})
}

func (c *apiCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}
