// Package charts holds the checks of the Helm charts beside it and of helmfile/: rendering with
// the Helm SDK, values schemas, monitoring assets, server-side dry runs against a real
// kube-apiserver, and the release pins (internal/pins, cmd/pins). It is its own module so the
// heavy Helm and Prometheus dependencies stay out of the product modules.
package charts
