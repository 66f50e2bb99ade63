//go:build e2eupgrade

package releasecheck

import "tatara.dev/operator/test/upgradeprobe"

// The e2e suite's upgrade build (make upgrade-image) carries the upgrade's CRD change, so its
// release check expects the upgraded chart's CRDs.
func init() { editBuiltCRD = upgradeprobe.Apply }
