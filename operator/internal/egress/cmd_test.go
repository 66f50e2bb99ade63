package egress

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestMainRefusesBadFlags: bad flags exit 2 with a message naming the flag, before anything
// connects to a cluster.
func TestMainRefusesBadFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", "ns"}, "--project is required"},
		{[]string{"--project", "demo"}, "--namespace is required"},
		{[]string{"--project", "Demo_1", "--namespace", "ns"}, "--project \"Demo_1\""},
		{[]string{"--project", "demo", "--namespace", "ns", "--max-connections", "0"}, "--max-connections must be positive"},
		{[]string{"--project", "demo", "--namespace", "ns", "--max-connections-per-source", "-1"}, "--max-connections-per-source must be positive"},
		{[]string{"--project", "demo", "--namespace", "ns", "--max-connections", "10", "--max-connections-per-source", "20"},
			"--max-connections-per-source 20 is above --max-connections 10"},
		{[]string{"--project", "demo", "--namespace", "ns", "--idle-timeout", "0s"}, "--idle-timeout must be positive"},
		{[]string{"--project", "demo", "--namespace", "ns", "--idle-timeout", "soon"}, "-idle-timeout"},
		{[]string{"--project", "demo", "--namespace", "ns", "--no-such-flag"}, "-no-such-flag"},
		{[]string{"--project", "demo", "--namespace", "ns", "extra"}, "takes no arguments"},
		{[]string{"--project", "demo", "--namespace", "ns", "--deny-cidr", "203.0.113.7"}, "-deny-cidr"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), c.args, &stdout, &stderr); code != 2 {
			t.Errorf("Main(%q) = %d, want 2", c.args, code)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("Main(%q) said %q, want it to name %q", c.args, stderr.String(), c.want)
		}
	}
}

// TestNamespaceDefaultsToPodNamespace: --namespace is $POD_NAMESPACE unless given.
func TestNamespaceDefaultsToPodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "from-env")
	var stderr bytes.Buffer
	f, err := parseFlags([]string{"--project", "demo"}, &stderr)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if f.namespace != "from-env" || f.listen != ":3128" || f.metricsAddr != ":8080" || f.probeAddr != ":8081" {
		t.Errorf("defaults: %+v", f)
	}
}

// TestDenyCIDRAddsToTheForbiddenRanges: each --deny-cidr is kept, masked, beside the built-in set.
func TestDenyCIDRAddsToTheForbiddenRanges(t *testing.T) {
	f, err := parseFlags([]string{"--project", "demo", "--namespace", "ns", "--deny-cidr", "203.0.113.7/24", "--deny-cidr", "2001:db8::1/32"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	if !slices.Equal(f.denied, want) {
		t.Errorf("denied = %v, want %v", f.denied, want)
	}
}
