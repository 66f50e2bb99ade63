package gitgateway

import (
	"fmt"
	"strings"
)

// checkRefFormat reports why name is not a full ref name git accepts, following the rules of
// `git check-ref-format` (without --allow-onelevel, --refspec-pattern or --normalize):
//   - it has at least two components ("refs/heads/x"), none of them empty (no leading, trailing
//     or doubled "/");
//   - no component begins with "." or ends with ".lock";
//   - it does not contain "..", "@{", an ASCII control character, space, or any of ~ ^ : ? * [ \;
//   - it does not end with "." and is not "@".
//
// Bytes >= 0x80 are allowed, as git allows them. It returns nil when name is valid.
func checkRefFormat(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("ref name is empty")
	case name == "@":
		return fmt.Errorf("ref name %q is not allowed", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("ref name %q begins with /", name)
	case strings.HasSuffix(name, "/"):
		return fmt.Errorf("ref name %q ends with /", name)
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("ref name %q ends with %q", name, ".")
	case strings.Contains(name, ".."):
		return fmt.Errorf("ref name %q contains %q", name, "..")
	case strings.Contains(name, "@{"):
		return fmt.Errorf("ref name %q contains %q", name, "@{")
	case !strings.Contains(name, "/"):
		return fmt.Errorf("ref name %q has only one component", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("ref name %q contains the control character %#02x", name, c)
		}
		if strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return fmt.Errorf("ref name %q contains %q", name, c)
		}
	}
	for comp := range strings.SplitSeq(name, "/") {
		switch {
		case comp == "":
			return fmt.Errorf("ref name %q has an empty component (//)", name)
		case strings.HasPrefix(comp, "."):
			return fmt.Errorf("ref name %q has a component beginning with . (%q)", name, comp)
		case strings.HasSuffix(comp, ".lock"):
			return fmt.Errorf("ref name %q has a component ending with .lock (%q)", name, comp)
		}
	}
	return nil
}

// checkBranchPrefix reports why prefix cannot name the Task's branch: refs/heads/<prefix> must be
// a valid ref name, and prefix must not begin with "-" (git refuses such branch names) nor be HEAD.
func checkBranchPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("branch prefix is empty")
	case strings.HasPrefix(prefix, "-"):
		return fmt.Errorf("branch prefix %q begins with -", prefix)
	case strings.HasPrefix(prefix, "/"):
		return fmt.Errorf("branch prefix %q begins with /", prefix)
	case prefix == "HEAD":
		return fmt.Errorf("branch prefix %q is not allowed", prefix)
	}
	if err := checkRefFormat("refs/heads/" + prefix); err != nil {
		return fmt.Errorf("branch prefix %q is not a valid branch name: %w", prefix, err)
	}
	return nil
}
