package pins

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// edit is one in-place replacement of a scalar's text.
type edit struct {
	s   scalar
	old string
	new string
}

// Bump moves component c to version everywhere and returns the files it changed; integrities
// come from npm (NPMIntegrity). See BumpWith.
func Bump(root string, c Component, version string) ([]string, error) {
	return BumpWith(root, c, version, NPMIntegrity)
}

// BumpWith moves component c to version everywhere and returns the files it changed, looking up
// the component's integrities with lookup. It rewrites only the scalars' text, so comments and
// layout stay as they are and the diff of the release MR is exactly the pins. Every lookup and
// edit is done before the first file is written: a failure leaves the files untouched.
func BumpWith(root string, c Component, version string, lookup IntegrityLookup) ([]string, error) {
	if err := ValidateVersion(version); err != nil {
		return nil, err
	}
	st, err := Load(root)
	if err != nil {
		return nil, err
	}
	var edits []edit
	for _, name := range c.Charts {
		ch := st.Charts[name]
		edits = append(edits, edit{ch.Version, ch.Version.value, version}, edit{ch.AppVersion, ch.AppVersion.value, version})
	}
	for _, rname := range c.Releases {
		r, ok := st.release(rname)
		if !ok {
			return nil, fmt.Errorf("failed to bump %s: %s has no release %q", c.Name, HelmfilePath, rname)
		}
		edits = append(edits, edit{r.Version, r.Version.value, version})
	}
	for _, rname := range c.ImageReleases {
		r, _ := st.release(rname)
		if !r.HasTag {
			return nil, fmt.Errorf("failed to bump %s: release %q in %s pins no image.tag", c.Name, rname, HelmfilePath)
		}
		edits = append(edits, edit{r.ImageTag, r.ImageTag.value, version})
	}
	if c.VersionVar != "" {
		v := st.Vars[c.VersionVar]
		edits = append(edits, edit{v, v.value, version})
	}
	for _, in := range c.Integrities {
		v, ok := st.Vars[in.Var]
		if !ok {
			return nil, fmt.Errorf("failed to bump %s: %s has no %s", c.Name, VersionsEnvPath, in.Var)
		}
		sum, err := lookup(in.Package, version)
		if err != nil {
			return nil, fmt.Errorf("failed to bump %s: %w", c.Name, err)
		}
		if !integrity.MatchString(sum) {
			return nil, fmt.Errorf("failed to bump %s: the integrity of %s@%s is %q, want sha512-<base64>", c.Name, in.Package, version, sum)
		}
		edits = append(edits, edit{v, v.value, sum})
	}
	for _, env := range c.AgentImageEnvs {
		ai := st.AgentImages[env]
		edits = append(edits, edit{ai.Tag, ":" + ai.Tag.value, ":" + version})
	}

	byFile := map[string][]edit{}
	for _, e := range edits {
		byFile[e.s.file] = append(byFile[e.s.file], e)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	contents := make([][]byte, len(files))
	for i, f := range files {
		if contents[i], err = applyEdits(root, f, byFile[f]); err != nil {
			return nil, err
		}
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(root, f), contents[i], 0o644); err != nil { //nolint:gosec // a tracked text file
			return nil, fmt.Errorf("failed to write %q: %w", f, err)
		}
	}
	return files, nil
}

// applyEdits returns the file with, on each edit's line, the first occurrence of the old text at
// or after the scalar's column replaced (quotes, if any, are kept because only the inner text
// changes).
func applyEdits(root, rel string, edits []edit) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, fmt.Errorf("failed to read %q: %w", rel, err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for _, e := range edits {
		if e.s.line < 1 || e.s.line > len(lines) {
			return nil, fmt.Errorf("failed to edit %s: line out of range", e.s)
		}
		line := string(lines[e.s.line-1])
		start := e.s.col - 1
		if start < 0 || start > len(line) {
			return nil, fmt.Errorf("failed to edit %s: column out of range", e.s)
		}
		idx := strings.Index(line[start:], e.old)
		if idx < 0 {
			return nil, fmt.Errorf("failed to edit %s: %q not found on the line", e.s, e.old)
		}
		idx += start
		lines[e.s.line-1] = []byte(line[:idx] + e.new + line[idx+len(e.old):])
	}
	return bytes.Join(lines, nil), nil
}
