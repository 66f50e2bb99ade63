package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"tatara.dev/cli/internal/cli"
	"tatara.dev/cli/pkg/testutil"
)

// TestMCPRejectsABadOperatorCABundle: a CA bundle that does not parse, or one next to a plain-HTTP
// operator URL, stops `tatara mcp` at start with an error naming the variable.
func TestMCPRejectsABadOperatorCABundle(t *testing.T) {
	ca := testutil.NewCA(t, "operator CA")
	tests := []struct {
		name   string
		bundle string
		url    string
		want   []string
	}{
		{"not PEM", "not a certificate", "https://op:8082", []string{"invalid TATARA_OPERATOR_CA_BUNDLE", "no PEM certificate"}},
		{"broken certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "https://op:8082",
			[]string{"invalid TATARA_OPERATOR_CA_BUNDLE", "not a valid certificate"}},
		{"plain-HTTP operator URL", string(ca.PEM), "http://op:8082",
			[]string{"TATARA_OPERATOR_CA_BUNDLE is set but TATARA_OPERATOR_URL", "not an https URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(cli.EnvOperatorCABundle, tt.bundle)
			t.Setenv(cli.EnvOperatorURL, tt.url)
			var stdout, stderr bytes.Buffer
			// stdio would block on the test's stdin: the check must come first.
			if code := cli.Execute([]string{"mcp", "--transport", "stdio"}, &stdout, &stderr); code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
