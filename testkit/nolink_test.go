package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoBinaryLinksTestkit: the production binaries' dependency graphs (through go.work) hold no
// package of this module, so a test server or fixture can never ship.
func TestNoBinaryLinksTestkit(t *testing.T) {
	for _, main := range []string{"tatara.dev/cli/cmd/tatara", "tatara.dev/operator/cmd", "tatara.dev/wrapper/cmd/wrapper"} {
		out, err := exec.Command("go", "list", "-deps", main).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", main, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages: %q", main, len(deps), deps)
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "tatara.dev/testkit") {
				t.Errorf("%s links %s", main, dep)
			}
		}
	}
}
