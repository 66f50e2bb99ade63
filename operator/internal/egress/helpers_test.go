package egress

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func schemeForTest() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, tatarav1.AddToScheme(s)
}

func prometheusRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
