// Package upstream checks the one URL a gateway sidecar (git, model) forwards to. A gateway holds
// a credential, so its upstream is checked where it is configured, and no error names the URL's
// user info, which may be a credential.
package upstream

import (
	"errors"
	"fmt"
	"net/url"
)

// Parse parses a flag's URL. url.Error repeats the whole URL, which may carry a credential: the
// error names only the cause.
func Parse(flag, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("invalid %s: %w", flag, err)
	}
	return u, nil
}

// Validate returns a copy of u without user info, or why it cannot be an upstream: http or https,
// a host, no credentials (credentialFrom says where the gateway's come from instead), no query or
// fragment. note follows "invalid upstream <url>" in every message, e.g. " (--upstream)".
func Validate(u *url.URL, note, credentialFrom string) (*url.URL, error) {
	if u == nil {
		return nil, fmt.Errorf("invalid upstream%s: no URL given", note)
	}
	cp := *u
	cp.User = nil
	shown := cp.String()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("invalid upstream %s%s: the scheme must be http or https", shown, note)
	case u.User != nil:
		return nil, fmt.Errorf("invalid upstream %s%s: the URL must not carry credentials (user info); the %s", shown, note, credentialFrom)
	case u.Opaque != "" || u.Host == "":
		return nil, fmt.Errorf("invalid upstream %s%s: no host", shown, note)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("invalid upstream %s%s: the URL must not have a query or fragment", shown, note)
	}
	return &cp, nil
}
