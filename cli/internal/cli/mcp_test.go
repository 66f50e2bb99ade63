package cli_test

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"

	"tatara.dev/cli/internal/cli"
	"tatara.dev/testkit/testutil"
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

// TestMCPRefusesATakenPort: when something else (the agent, in the same network namespace) holds
// the MCP or metrics port, `tatara mcp` exits 1 naming the address instead of serving beside it;
// the kubelet's restart then shows as a sidecar restart, which ends the Task (operator,
// SidecarRestarted).
func TestMCPRefusesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		return ln.Addr().String()
	}
	for _, tt := range []struct{ name, listen, metrics, want string }{
		{"MCP port", taken.Addr().String(), free(), "failed to listen for MCP on " + strconv.Quote(taken.Addr().String())},
		{"metrics port", free(), taken.Addr().String(), "failed to listen for metrics on " + strconv.Quote(taken.Addr().String())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli.Execute([]string{"mcp", "--transport", "http", "--listen", tt.listen, "--metrics-addr", tt.metrics}, &stdout, &stderr); code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "address already in use") {
				t.Errorf("stderr lacks %q and the cause:\n%s", tt.want, stderr.String())
			}
		})
	}
}
