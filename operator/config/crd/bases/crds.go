// Package bases embeds the CRDs controller-gen writes here (make generate), so the operator's
// release check can compare the cluster's CRDs with the ones this build was made for.
package bases

import "embed"

// FS holds tatara.dev_projects.yaml and tatara.dev_tasks.yaml.
//
//go:embed *.yaml
var FS embed.FS
