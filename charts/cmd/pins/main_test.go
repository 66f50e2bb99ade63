package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no command", nil, 2, "", "usage: pins check|bump|version"},
		{"unknown command", []string{"deploy"}, 2, "", `unknown command "deploy"`},
		{"check the repository", []string{"check", "--root", "../../.."}, 0, "check-pins: operator", ""},
		{"check a wrong image tag", []string{"check", "--root", "../../..", "--images", "tatara.local/tatara-cli:9.9.9"}, 1, "", "make images builds tatara-cli:9.9.9"},
		{"version", []string{"version", "--root", "../../..", "--component", "operator"}, 0, ".", ""},
		{"bump an unknown component", []string{"bump", "--root", "../../..", "--component", "memory", "--version", "1.0.0"}, 2, "", `unknown component "memory"`},
		{"bump to latest", []string{"bump", "--root", "../../..", "--component", "cli", "--version", "latest"}, 1, "", `invalid version "latest"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderr)
			}
		})
	}
}
