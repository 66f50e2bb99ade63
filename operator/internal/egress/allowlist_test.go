package egress

import (
	"fmt"
	"strings"
	"testing"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

func projectWith(allow []string, repoURLs []string, modelURL string) *tatarav1.Project {
	p := &tatarav1.Project{}
	p.Name = "demo"
	p.Spec.Egress = &tatarav1.ProjectEgress{Mode: tatarav1.EgressProxy, ProxyURL: "http://egress:3128", Allow: allow}
	for i, u := range repoURLs {
		p.Spec.Repos = append(p.Spec.Repos, tatarav1.ProjectRepo{Name: "r" + string(rune('a'+i)), URL: u})
	}
	if modelURL != "" {
		p.Spec.Agent.Model = &tatarav1.AgentModel{BaseURL: modelURL, SecretName: "model"}
	}
	return p
}

// TestPolicyCheck: what a Project's allow-list lets through, by host and port, before anything
// is resolved: entries with and without ports, wildcards at any depth but not their own domain,
// case and trailing dots on both sides, IDNs in Unicode, addresses in every spelling, and the
// hosts of the Project's repos and model, which need no entry of their own.
func TestPolicyCheck(t *testing.T) {
	p := projectWith(
		[]string{"registry.pkgs.example", "*.pkgs.example", "Mirror.Example.Net.", "*.files.example.org:8443", "git.example:2222",
			"xn--bcher-kva.example", "*.xn--caf-dma.example"},
		[]string{"https://github.com/acme/app.git", "http://plain.example/repo", "ssh://git@ssh.example:2200/acme/app",
			"ssh://gitlab.example/acme/app", "git@bitbucket.example:acme/app.git", "https://code.example:8443/app"},
		"https://api.anthropic.com/v1")
	list, errs := NewAllowList(p)
	if len(errs) > 0 {
		t.Fatalf("valid Project: %v", errs)
	}
	var pol allowlist.Policy
	pol.Set(list)
	for _, c := range []struct {
		host string
		port int
		want allowlist.Reason
	}{
		// Entries: no port is 443 and 80; a port is that port alone.
		{"registry.pkgs.example", 443, allowlist.ReasonAllowed},
		{"registry.pkgs.example", 80, allowlist.ReasonAllowed},
		{"registry.pkgs.example", 8443, allowlist.ReasonNotAllowed},
		{"files.files.example.org", 8443, allowlist.ReasonAllowed},
		{"files.files.example.org", 443, allowlist.ReasonNotAllowed},
		{"git.example", 2222, allowlist.ReasonAllowed},
		{"git.example", 443, allowlist.ReasonNotAllowed},
		// Wildcards: subdomains at any depth, not the domain, not a look-alike.
		{"a.pkgs.example", 443, allowlist.ReasonAllowed},
		{"a.b.c.pkgs.example", 443, allowlist.ReasonAllowed},
		{"pkgs.example", 443, allowlist.ReasonNotAllowed},
		{"evilpkgs.example", 443, allowlist.ReasonNotAllowed},
		{"pkgs.example.evil.example", 443, allowlist.ReasonNotAllowed},
		{"files.example.org", 8443, allowlist.ReasonNotAllowed},
		// Case and trailing dots, on the request's side and the entry's.
		{"REGISTRY.PKGS.EXAMPLE", 443, allowlist.ReasonAllowed},
		{"registry.pkgs.example.", 443, allowlist.ReasonAllowed},
		{"mirror.example.net", 443, allowlist.ReasonAllowed},
		{"registry.pkgs.example..", 443, allowlist.ReasonBadRequest},
		// IDNs: a Unicode request host is matched in its xn-- form.
		{"bücher.example", 443, allowlist.ReasonAllowed},
		{"BÜCHER.example", 443, allowlist.ReasonAllowed},
		{"shop.café.example", 443, allowlist.ReasonAllowed},
		{"xn--bcher-kva.example", 443, allowlist.ReasonAllowed},
		{"bucher.example", 443, allowlist.ReasonNotAllowed},
		// Addresses, in every spelling, whatever the list says.
		{"127.0.0.1", 443, allowlist.ReasonIPLiteral},
		{"::1", 443, allowlist.ReasonIPLiteral},
		{"[::1]", 443, allowlist.ReasonIPLiteral},
		{"fe80::1%eth0", 443, allowlist.ReasonIPLiteral},
		{"[fe80::1%25eth0]", 443, allowlist.ReasonIPLiteral},
		{"::ffff:169.254.169.254", 80, allowlist.ReasonIPLiteral},
		{"127.1", 443, allowlist.ReasonIPLiteral},
		{"2130706433", 443, allowlist.ReasonIPLiteral},
		{"0x7f.0x0.0x0.0x1", 443, allowlist.ReasonIPLiteral},
		{"１２７.０.０.１", 443, allowlist.ReasonIPLiteral}, // fullwidth digits and dots
		{"registry.pkgs.example.1", 443, allowlist.ReasonIPLiteral},
		// No host name at all.
		{"", 443, allowlist.ReasonBadRequest},
		{"[evil.example]", 443, allowlist.ReasonBadRequest},
		{"a b.example", 443, allowlist.ReasonBadRequest},
		{"evil.example/x", 443, allowlist.ReasonBadRequest},
		{strings.Repeat("a.", 130) + "example", 443, allowlist.ReasonBadRequest},
		// Repo hosts at their scheme's port (or the URL's), and the model's host.
		{"github.com", 443, allowlist.ReasonAllowed},
		{"github.com", 80, allowlist.ReasonNotAllowed},
		{"plain.example", 80, allowlist.ReasonAllowed},
		{"plain.example", 443, allowlist.ReasonNotAllowed},
		{"ssh.example", 2200, allowlist.ReasonAllowed},
		{"ssh.example", 22, allowlist.ReasonNotAllowed},
		{"gitlab.example", 22, allowlist.ReasonAllowed},
		{"bitbucket.example", 22, allowlist.ReasonAllowed},
		{"code.example", 8443, allowlist.ReasonAllowed},
		{"api.anthropic.com", 443, allowlist.ReasonAllowed},
		{"api.anthropic.com", 80, allowlist.ReasonNotAllowed},
		{"anthropic.com", 443, allowlist.ReasonNotAllowed},
	} {
		if _, got := pol.Check(c.host, c.port); got != c.want {
			t.Errorf("Check(%q, %d) = %s, want %s", c.host, c.port, got, c.want)
		}
	}
}

// TestPolicyRefusesEverythingBeforeTheProject: a proxy that has not read its Project refuses
// every host, even one any Project would allow.
func TestPolicyRefusesEverythingBeforeTheProject(t *testing.T) {
	var pol allowlist.Policy
	if pol.Ready() {
		t.Fatal("a Policy without a Project is ready")
	}
	if _, got := pol.Check("github.com", 443); got != allowlist.ReasonNoProject {
		t.Errorf("before the Project: %s, want %s", got, allowlist.ReasonNoProject)
	}
	list, _ := NewAllowList(projectWith(nil, []string{"https://github.com/a/b"}, ""))
	pol.Set(list)
	if _, got := pol.Check("github.com", 443); got != allowlist.ReasonAllowed {
		t.Errorf("after the Project: %s, want %s", got, allowlist.ReasonAllowed)
	}
	pol.Set(nil)
	if _, got := pol.Check("github.com", 443); got != allowlist.ReasonNoProject {
		t.Errorf("after the Project was deleted: %s, want %s", got, allowlist.ReasonNoProject)
	}
}

// TestInvalidEntriesAreReportedNotSkipped: every entry or URL that cannot be on the list comes
// back as an error naming it, and the valid ones around it still count.
func TestInvalidEntriesAreReportedNotSkipped(t *testing.T) {
	bad := []string{"10.0.0.1", "[::1]", "*.example.com:0", "host.example:70000", "host.example:+80", "bücher.example",
		"*", "*.", "-bad.example", "bad-.example", "under_score.example", "a..example", "x.123", strings.Repeat("a", 64) + ".example"}
	badRepos := []string{"https://10.0.0.1/repo", "ftp://host.example/repo", "git@[::1]:repo", "not a url", "https:///path"}
	p := projectWith(append([]string{"good.example"}, bad...), append([]string{"https://github.com/a/b"}, badRepos...),
		"https://169.254.169.254/v1")
	list, errs := NewAllowList(p)
	if want := len(bad) + len(badRepos) + 1; len(errs) != want {
		t.Errorf("%d errors, want %d: %v", len(errs), want, errs)
	}
	all := make([]string, len(errs))
	for i, e := range errs {
		all[i] = e.Error()
	}
	joined := strings.Join(all, "\n")
	for i, entry := range bad {
		if want := fmt.Sprintf("spec.egress.allow[%d] %q", i+1, entry); !strings.Contains(joined, want) {
			t.Errorf("no error names %s (%q)", want, entry)
		}
	}
	for _, u := range badRepos {
		if !strings.Contains(joined, u) {
			t.Errorf("no error names repo url %q", u)
		}
	}
	if !strings.Contains(joined, "spec.agent.model.baseURL") {
		t.Errorf("no error names the model's address URL: %s", joined)
	}
	var pol allowlist.Policy
	pol.Set(list)
	for _, host := range []string{"good.example", "github.com"} {
		if _, got := pol.Check(host, 443); got != allowlist.ReasonAllowed {
			t.Errorf("%s next to invalid entries: %s, want allowed", host, got)
		}
	}
}
