package egress

import (
	"fmt"
	"net/url"
	"strings"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

// NewAllowList is the Project's allow-list: spec.egress.allow, the host and port of every
// spec.repos[].url, and those of spec.agent.model.baseURL, so that the repositories and the model
// need no second list kept in step. An entry or URL that cannot be added is left out and returned
// as an error naming it: the caller logs and counts them (an entry is never skipped silently).
func NewAllowList(p *tatarav1.Project) (*allowlist.AllowList, []error) {
	l := allowlist.New()
	var errs []error
	if e := p.Spec.Egress; e != nil {
		for i, entry := range e.Allow {
			if err := l.AddEntry(entry); err != nil {
				errs = append(errs, fmt.Errorf("spec.egress.allow[%d] %q: %w", i, entry, err))
			}
		}
	}
	for i, r := range p.Spec.Repos {
		if err := addURL(l, r.URL, repoHostPort); err != nil {
			errs = append(errs, fmt.Errorf("spec.repos[%d].url %q: %w", i, r.URL, err))
		}
	}
	if m := p.Spec.Agent.Model; m != nil && m.BaseURL != "" {
		if err := addURL(l, m.BaseURL, httpHostPort); err != nil {
			errs = append(errs, fmt.Errorf("spec.agent.model.baseURL %q: %w", m.BaseURL, err))
		}
	}
	return l, errs
}

// addURL adds the one host and port of a URL, split by hostPortOf.
func addURL(l *allowlist.AllowList, raw string, hostPortOf func(string) (string, int, error)) error {
	host, port, err := hostPortOf(raw)
	if err != nil {
		return err
	}
	return l.AddHost(host, port)
}

// repoHostPort is the host and port a clone URL connects to: https://, http:// and ssh:// URLs
// (the URL's port, else 443, 80 and 22), and git's scp-like [user@]host:path (22).
func repoHostPort(raw string) (string, int, error) {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", 0, fmt.Errorf("not a URL")
		}
		def, ok := map[string]int{"https": 443, "http": 80, "ssh": 22}[u.Scheme]
		if !ok {
			return "", 0, fmt.Errorf("scheme %q is not https, http or ssh", u.Scheme)
		}
		return urlHostPort(u, def)
	}
	hostPart, _, ok := strings.Cut(raw, ":")
	if !ok || strings.Contains(hostPart, "/") {
		return "", 0, fmt.Errorf("neither a URL nor [user@]host:path")
	}
	if i := strings.LastIndexByte(hostPart, '@'); i >= 0 {
		hostPart = hostPart[i+1:]
	}
	if hostPart == "" {
		return "", 0, fmt.Errorf("no host")
	}
	return hostPart, 22, nil
}

// httpHostPort is the host and port of an http(s) URL (the model's baseURL).
func httpHostPort(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, fmt.Errorf("not a URL")
	}
	def, ok := map[string]int{"https": 443, "http": 80}[u.Scheme]
	if !ok {
		return "", 0, fmt.Errorf("scheme %q is not https or http", u.Scheme)
	}
	return urlHostPort(u, def)
}

func urlHostPort(u *url.URL, defaultPort int) (string, int, error) {
	if u.Hostname() == "" {
		return "", 0, fmt.Errorf("no host")
	}
	if u.Port() == "" {
		return u.Hostname(), defaultPort, nil
	}
	p, ok := allowlist.ParsePort(u.Port())
	if !ok {
		return "", 0, fmt.Errorf("port %q is not 1 to 65535", u.Port())
	}
	return u.Hostname(), p, nil
}
