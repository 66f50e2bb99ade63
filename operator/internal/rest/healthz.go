package rest

import "net/http"

// HealthzPath answers 200 "ok" to anyone, without a token: the tatara-operator chart's release
// check (`operator release-check`) proves through the Service that the REST API is served (on
// TLS, with the certificate that names the Service). It reads nothing, so it reveals nothing.
const HealthzPath = "/healthz"

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}
