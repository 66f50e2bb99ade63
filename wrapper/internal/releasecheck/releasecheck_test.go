package releasecheck

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReleaseCheck(t *testing.T) {
	const image = "tatara.local/tatara-wrapper:0.1.0"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "image"), []byte(image), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		dir, image string
		appVersion string
		wantCode   int
		wantLines  []string
	}{
		{
			name: "the release as deployed", dir: dir, image: image, appVersion: "0.1.0", wantCode: 0,
			wantLines: []string{
				"PASS  the runtime ConfigMap tatara-wrapper-runtime names the release's image " + image,
				"PASS  the image is the chart's build (appVersion 0.1.0)",
				"release-check tatara-wrapper: 2 checks, 2 passed",
			},
		},
		{
			name: "chart bumped, image not rebuilt", dir: dir, image: image, appVersion: "0.2.0", wantCode: 1,
			wantLines: []string{
				"FAIL  the image is the chart's build (appVersion 0.2.0): the image runs wrapper 0.1.0, but the chart's appVersion is 0.2.0: the pinned image tag is not this chart's build",
				"release-check tatara-wrapper: 2 checks, 1 passed, 1 FAILED",
			},
		},
		{
			name: "ConfigMap missing", dir: t.TempDir(), image: image, appVersion: "0.1.0", wantCode: 1,
			wantLines: []string{"FAIL  the runtime ConfigMap tatara-wrapper-runtime names the release's image " + image + ": the ConfigMap tatara-wrapper-runtime or its key image does not exist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(&out, "tatara-wrapper", "tatara-wrapper-runtime", tt.dir, tt.image, tt.appVersion, "0.1.0")
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			for _, l := range tt.wantLines {
				if !strings.Contains(out.String(), l) {
					t.Errorf("output lacks %q:\n%s", l, out.String())
				}
			}
		})
	}
}

func TestMainRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"--no-such-flag"}, &out, &errOut); code != 2 {
		t.Errorf("unknown flag: exit code %d, want 2", code)
	}
	if code := Main([]string{"extra"}, &out, &errOut); code != 2 {
		t.Errorf("positional argument: exit code %d, want 2", code)
	}
}
