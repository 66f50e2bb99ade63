package manager

import (
	"context"
	"strings"
	"testing"

	restclient "k8s.io/client-go/rest"

	"tatara.dev/operator/internal/controller"
	"tatara.dev/operator/internal/rest"
)

// TestNewRefusesABadRateLimit: a negative --api-rate-limit or --api-rate-burst stops the operator
// at start with an error naming the setting, before it talks to any API server (the config points
// nowhere).
func TestNewRefusesABadRateLimit(t *testing.T) {
	for _, tc := range []struct {
		limit rest.RateLimit
		want  string
	}{
		{rest.RateLimit{PerSecond: -5, Burst: 40}, "rate limit of -5 requests/s"},
		{rest.RateLimit{PerSecond: 20, Burst: -1}, "rate burst of -1 requests"},
	} {
		_, err := New(context.Background(), &restclient.Config{Host: "http://127.0.0.1:1"}, Options{
			Controller: controller.Config{RuntimeNamespace: "tatara-system"}, APIRateLimit: tc.limit,
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v: error %v, want one containing %q", tc.limit, err, tc.want)
		}
	}
}
