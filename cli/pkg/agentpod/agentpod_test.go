package agentpod_test

import (
	"net"
	"net/url"
	"strconv"
	"testing"

	"tatara.dev/cli/pkg/agentpod"
)

// TestAddressesAreLoopbackAndDistinct: the listeners the agent must not reach from outside the pod
// are loopback, the URLs name them, and no two containers share a port.
func TestAddressesAreLoopbackAndDistinct(t *testing.T) {
	ports := map[string]string{}
	claim := func(port, who string) {
		t.Helper()
		if other, ok := ports[port]; ok {
			t.Errorf("port %s is both %s's and %s's", port, other, who)
		}
		ports[port] = who
	}
	for _, tc := range []struct{ who, listen, url string }{
		{"the cli's MCP", agentpod.MCPListen, agentpod.MCPURL},
		{"the git gateway", agentpod.GitGatewayListen, agentpod.GitGatewayURL},
		{"the model gateway", agentpod.ModelGatewayListen, agentpod.ModelGatewayURL},
	} {
		host, port, err := net.SplitHostPort(tc.listen)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			t.Errorf("%s listens on %q: want a loopback host:port (%v)", tc.who, tc.listen, err)
		}
		u, err := url.Parse(tc.url)
		if err != nil || u.Host != tc.listen {
			t.Errorf("%s's URL %q does not name its address %q (%v)", tc.who, tc.url, tc.listen, err)
		}
		claim(port, tc.who)
	}
	claim(strconv.Itoa(agentpod.WrapperMetricsPort), "the wrapper's metrics")
	claim(strconv.Itoa(agentpod.CLIMetricsPort), "the cli's metrics")
	claim(strconv.Itoa(agentpod.GitGatewayHealthPort), "the git gateway's health")
	claim(strconv.Itoa(agentpod.ModelGatewayMetricsPort), "the model gateway's metrics")
}
