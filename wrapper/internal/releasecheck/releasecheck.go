// Package releasecheck is `wrapper release-check`, the tatara-wrapper chart's post-deploy check
// (its Helm test pod runs it in the release's own image): the runtime ConfigMap names the
// release's image, and this image is the chart's build. It needs no cluster access: the chart
// mounts the ConfigMap into the pod.
package releasecheck

import (
	"flag"
	"fmt"
	"io"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/releasecheck"
)

// Main runs the check with args (after "release-check") and returns the exit code: 0 when every
// check passed, 1 when one failed, 2 for bad flags.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wrapper release-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	chart := fs.String("chart", "tatara-wrapper", "chart name, for the summary line")
	configMap := fs.String("runtime-configmap", "tatara-wrapper-runtime", "name of the runtime ConfigMap, for messages")
	dir := fs.String("runtime-config-dir", "", "directory where the runtime ConfigMap is mounted (file image)")
	image := fs.String("image", "", "the release's image (repository:tag), which the runtime ConfigMap must name")
	appVersion := fs.String("app-version", "", "the chart's appVersion, which this image's version must be")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "wrapper release-check takes no arguments, got %q\n", fs.Args())
		return 2
	}
	return run(stdout, *chart, *configMap, *dir, *image, *appVersion, buildinfo.Version)
}

func run(w io.Writer, chart, configMap, dir, image, appVersion, version string) int {
	r := releasecheck.New(w, chart)
	r.Check(fmt.Sprintf("the runtime ConfigMap %s names the release's image %s", configMap, image),
		releasecheck.RuntimeImage(configMap, dir, image))
	r.Check(fmt.Sprintf("the image is the chart's build (appVersion %s)", appVersion),
		releasecheck.Version("wrapper", version, appVersion))
	return r.Done()
}
