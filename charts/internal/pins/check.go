package pins

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// problems collects what Check finds; err sorts them into one error wrapping ErrMismatch.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	sort.Strings(p)
	return fmt.Errorf("%w:\n  %s", ErrMismatch, strings.Join(p, "\n  "))
}

// Check returns every disagreement between the pins, and between the pins and images, the
// references `make images` builds (name:tag, registry prefix allowed; nil skips the image
// checks). Each problem names the file, line and both values; the error wraps ErrMismatch.
func (st *State) Check(images []string) error {
	var p problems
	var built map[string][]string
	if images != nil {
		built = builtTags(&p, images)
	}
	for _, c := range Components {
		st.checkComponent(&p, c, built)
	}
	st.checkPinnedImages(&p, built)
	if built != nil {
		checkEveryImageVersioned(&p, built)
	}
	st.checkRolloutOrder(&p)
	for _, r := range st.Releases {
		if r.ImageTag.value == "latest" || r.Version.value == "latest" {
			p.add("%s: release %s pins \"latest\"", r.ImageTag, r.Name)
		}
	}
	return p.err()
}

// builtTags maps each image `make images` builds to its tags.
func builtTags(p *problems, images []string) map[string][]string {
	built := map[string][]string{}
	for _, ref := range images {
		name, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
		if !ok {
			p.add("make images builds %q without a tag", ref)
			continue
		}
		built[name] = append(built[name], tag)
	}
	return built
}

// checkComponent: c's charts, releases, integrities, agent images and built images all carry
// its version. built is nil when the images are not checked.
func (st *State) checkComponent(p *problems, c Component, built map[string][]string) {
	want, pin := st.Version(c), st.pin(c)
	// pinned says where the version comes from, for the messages about the other pins.
	pinned := fmt.Sprintf("helmfile and charts pin %s", want)
	if c.VersionVar != "" {
		pinned = fmt.Sprintf("%s pins %s=%s", pin, c.VersionVar, want)
	}
	if err := ValidateVersion(want); err != nil {
		p.add("%s: component %s: %v", pin, c.Name, err)
	}
	st.checkCharts(p, c, want, pin)
	st.checkReleases(p, c, want, pin)
	for _, in := range c.Integrities {
		v, ok := st.Vars[in.Var]
		switch {
		case !ok:
			p.add("%s: no %s (npm view %s@%s dist.integrity; make bump COMPONENT=%s sets it)", VersionsEnvPath, in.Var, in.Package, want, c.Name)
		case !integrity.MatchString(v.value):
			p.add("%s: %s is %q, want a sha512- integrity (npm view %s@%s dist.integrity)", v, in.Var, v.value, in.Package, want)
		}
	}
	for _, env := range c.AgentImageEnvs {
		ai, ok := st.AgentImages[env]
		if !ok {
			p.add("%s: no project.agentImage (component %s)", env, c.Name)
			continue
		}
		if ai.Name != c.Images[0] {
			p.add("%s: project.agentImage is %q, want the %s image (component %s)", ai.Tag, ai.Ref, c.Images[0], c.Name)
		}
		if ai.Tag.value != want {
			p.add("%s: project.agentImage pins %s:%s but %s (component %s)", ai.Tag, ai.Name, ai.Tag.value, pinned, c.Name)
		}
	}
	if built == nil {
		return
	}
	for _, img := range c.Images {
		tags := built[img]
		switch {
		case len(tags) == 0:
			p.add("make images does not build %s (want %s:%s)", img, img, want)
		case len(tags) != 1 || tags[0] != want:
			p.add("make images builds %s:%s but %s (component %s)", img, strings.Join(tags, ","), pinned, c.Name)
		}
	}
}

// checkCharts: each chart of c has version == appVersion == want.
func (st *State) checkCharts(p *problems, c Component, want string, pin scalar) {
	for _, name := range c.Charts {
		ch := st.Charts[name]
		if ch.Version.value != ch.AppVersion.value {
			p.add("%s: chart %s has version %q but appVersion %q (they move together)", ch.Version, name, ch.Version.value, ch.AppVersion.value)
		}
		if ch.AppVersion.value != want {
			p.add("%s: chart %s has appVersion %q but component %s is at %q (%s)", ch.AppVersion, name, ch.AppVersion.value, c.Name, want, pin)
		}
	}
}

// checkReleases: each helmfile release of c pins its chart's version, and those that run c's
// image pin want as image.tag.
func (st *State) checkReleases(p *problems, c Component, want string, pin scalar) {
	for i, rname := range c.Releases {
		r, ok := st.release(rname)
		if !ok {
			p.add("%s: no release %q", HelmfilePath, rname)
			continue
		}
		chart := st.Charts[c.Charts[i]]
		if r.Version.value == "" {
			p.add("%s: release %s pins no chart version", HelmfilePath, rname)
		} else if r.Version.value != chart.Version.value {
			p.add("%s: release %s pins chart version %q but %s has version %q", r.Version, rname, r.Version.value, chart.Version, chart.Version.value)
		}
	}
	for _, rname := range c.ImageReleases {
		r, ok := st.release(rname)
		if !ok {
			continue
		}
		switch {
		case !r.HasTag:
			p.add("%s: release %s pins no image.tag", HelmfilePath, rname)
		case r.ImageTag.value != want:
			p.add("%s: release %s pins image.tag %q but %s has appVersion %q", r.ImageTag, rname, r.ImageTag.value, pin, want)
		}
	}
}

// checkPinnedImages: the e2e monitoring images are tagged, in values and in `make images`, as
// hack/versions.env pins them.
func (st *State) checkPinnedImages(p *problems, built map[string][]string) {
	for _, img := range PinnedImages {
		want := st.Vars[img.VersionVar]
		if tag := st.PinnedTags[img.Name]; tag.value != want.value {
			p.add("%s: %s is %q but %s pins %s=%s", tag, strings.Join(img.ValuesTag, "."), tag.value, want, img.VersionVar, want.value)
		}
		if tags := built[img.Name]; built != nil && (len(tags) != 1 || tags[0] != want.value) {
			p.add("make images builds %s:%s but %s pins %s=%s", img.Name, strings.Join(tags, ","), want, img.VersionVar, want.value)
		}
	}
}

// checkEveryImageVersioned: `make images` builds no image that no component or pin versions.
func checkEveryImageVersioned(p *problems, built map[string][]string) {
	known := map[string]bool{}
	for _, c := range Components {
		for _, img := range c.Images {
			known[img] = true
		}
	}
	for _, img := range PinnedImages {
		known[img.Name] = true
	}
	for img := range built {
		if !known[img] {
			p.add("make images builds %s, which no component versions", img)
		}
	}
}

// checkRolloutOrder: exactly these releases, in this order, after the monitoring stack, each
// needing the previous one; and the monitoring objects need the monitoring stack's CRDs.
func (st *State) checkRolloutOrder(p *problems) {
	var names []string
	for _, r := range st.Releases {
		names = append(names, r.Name)
	}
	order := append([]string{MonitoringRelease}, RolloutOrder...)
	needs := func(r Release, name string) bool {
		return slices.ContainsFunc(r.Needs, func(n string) bool { return n == name || strings.HasSuffix(n, "/"+name) })
	}
	if !slices.Equal(names, order) {
		p.add("%s: releases are [%s], want the rollout order [%s]", HelmfilePath, strings.Join(names, " "), strings.Join(order, " "))
		return
	}
	for i := 2; i < len(st.Releases); i++ {
		if prev := order[i-1]; !needs(st.Releases[i], prev) {
			p.add("%s: release %s does not need %s (rollout order)", HelmfilePath, st.Releases[i].Name, prev)
		}
	}
	for _, name := range MonitoringReleases {
		if r, _ := st.release(name); !needs(r, MonitoringRelease) {
			p.add("%s: release %s renders monitoring objects but does not need %s (their CRDs)", HelmfilePath, name, MonitoringRelease)
		}
	}
}
