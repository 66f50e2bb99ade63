package pins

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// IntegrityLookup returns the npm registry's dist.integrity of package pkg at version.
type IntegrityLookup func(pkg, version string) (string, error)

// npmTimeout bounds one `npm view`.
const npmTimeout = 2 * time.Minute

// NPMIntegrity asks npm for the dist.integrity of pkg@version (`npm view pkg@version
// dist.integrity`), the sha512 the agent image build verifies the download against.
func NPMIntegrity(pkg, version string) (string, error) {
	spec := pkg + "@" + version
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm is not installed (it asks the npm registry): %w", spec, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "view", spec, "dist.integrity")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm view %s dist.integrity: %w: %s", spec, spec, err, strings.TrimSpace(stderr.String()))
	}
	out := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(out, "sha512-") {
		return "", fmt.Errorf("failed to look up the integrity of %s: npm view %s dist.integrity printed %q, want a sha512- integrity (does version %s exist?)", spec, spec, out, version)
	}
	return out, nil
}
