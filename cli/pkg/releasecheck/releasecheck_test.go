package releasecheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	type check struct {
		what string
		err  error
	}
	tests := []struct {
		name     string
		checks   []check
		wantOut  string
		wantCode int
	}{
		{
			name:     "all passed",
			checks:   []check{{"the ConfigMap names the image", nil}, {"the image is the chart's build", nil}},
			wantOut:  "PASS  the ConfigMap names the image\nPASS  the image is the chart's build\nrelease-check tatara-cli: 2 checks, 2 passed\n",
			wantCode: 0,
		},
		{
			name:     "one failed",
			checks:   []check{{"a", nil}, {"b", errors.New("it broke")}},
			wantOut:  "PASS  a\nFAIL  b: it broke\nrelease-check tatara-cli: 2 checks, 1 passed, 1 FAILED\n",
			wantCode: 1,
		},
		{
			name:     "a multi-line cause stays on one line",
			checks:   []check{{"healthz", errors.New("status 500\nbody: boom\n")}},
			wantOut:  "FAIL  healthz: status 500 | body: boom\nrelease-check tatara-cli: 1 checks, 0 passed, 1 FAILED\n",
			wantCode: 1,
		},
		{
			name:     "nothing checked fails",
			wantOut:  "release-check tatara-cli: 0 checks, 0 passed (nothing was checked)\n",
			wantCode: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := New(&buf, "tatara-cli")
			for _, c := range tt.checks {
				r.Check(c.what, c.err)
			}
			if code := r.Done(); code != tt.wantCode {
				t.Errorf("Done() = %d, want %d", code, tt.wantCode)
			}
			if buf.String() != tt.wantOut {
				t.Errorf("output:\n%s\nwant:\n%s", buf.String(), tt.wantOut)
			}
		})
	}
}

func TestRuntimeImage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "image"), []byte("reg/tatara-cli:0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		want    string
		wantErr string
	}{
		{name: "names the release's image", dir: dir, want: "reg/tatara-cli:0.1.0"},
		{name: "names another image", dir: dir, want: "reg/tatara-cli:0.2.0", wantErr: `it names "reg/tatara-cli:0.1.0"`},
		{name: "ConfigMap not mounted", dir: t.TempDir(), want: "reg/tatara-cli:0.1.0", wantErr: "ConfigMap tatara-cli-runtime or its key image does not exist"},
		{name: "no image given", dir: dir, want: "", wantErr: "--image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RuntimeImage("tatara-cli-runtime", tt.dir, tt.want)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if err := Version("tatara", "0.1.0", "0.1.0"); err != nil {
		t.Errorf("same version: %v", err)
	}
	err := Version("tatara", "0.1.0", "0.2.0")
	want := "the image runs tatara 0.1.0, but the chart's appVersion is 0.2.0: the pinned image tag is not this chart's build"
	if err == nil || err.Error() != want {
		t.Errorf("different version: %v, want %q", err, want)
	}
	if err := Version("tatara", "0.1.0", ""); err == nil {
		t.Error("an empty appVersion passed")
	}
}

func TestSummaries(t *testing.T) {
	var log bytes.Buffer
	log.WriteString("NAME: tatara-cli\nPHASE: Succeeded\n\nPOD LOGS: tatara-cli-release-check\n")
	a := New(&log, "tatara-cli")
	a.Check("a", nil)
	a.Check("b", nil)
	a.Done()
	log.WriteString("POD LOGS: tatara-project-release-check\n")
	b := New(&log, "tatara-project")
	b.Check("ready", errors.New("not ready"))
	b.Done()
	got := Summaries(log.String())
	want := []Summary{{"tatara-cli", 2, 2}, {"tatara-project", 1, 0}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Summaries = %+v, want %+v\n%s", got, want, log.String())
	}
	if !got[0].OK() || got[1].OK() {
		t.Errorf("OK: %v %v, want true false", got[0].OK(), got[1].OK())
	}
	if (Summary{Chart: "x"}).OK() {
		t.Error("a summary of zero checks is OK")
	}
	if s := Summaries("helmfile: release-check tatara-wrapper: 2 checks, 1 passed, 1 FAILED"); len(s) != 1 || s[0].OK() {
		t.Errorf("a prefixed failed summary: %+v, want one, not OK", s)
	}
}
