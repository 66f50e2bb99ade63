// Package chartrelease keeps a record of every released chart version's content, so that a chart
// whose files change cannot keep its version: a cluster that already runs chart X at version V
// would otherwise get different objects under the same V, and helmfile would not see an upgrade.
// It is chart-testing's `ct lint --check-version-increment`, against a committed record instead of
// a git branch: charts/releases.yaml maps chart -> version -> the digest of its files.
package chartrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// RecordFile is the record, relative to the repository root.
const RecordFile = "charts/releases.yaml"

// Record maps a chart name to its released versions and their content digests.
type Record map[string]map[string]string

// Load reads the record; a missing file is an empty record.
func Load(root string) (Record, error) {
	b, err := os.ReadFile(filepath.Join(root, RecordFile))
	if os.IsNotExist(err) {
		return Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", RecordFile, err)
	}
	var r Record
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not a map of chart -> version -> digest: %w", RecordFile, err)
	}
	if r == nil {
		r = Record{}
	}
	return r, nil
}

// Save writes the record.
func (r Record) Save(root string) error {
	b, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	header := "# The content digest of every released chart version (package tatara.dev/charts/internal/chartrelease).\n" +
		"# `make generate` adds the current version of a chart; it never changes a recorded one. An entry\n" +
		"# added by a change that has not landed yet may be deleted and recorded again in that change.\n"
	return os.WriteFile(filepath.Join(root, RecordFile), append([]byte(header), b...), 0o644)
}

// Digest is the sha256 of a chart directory's files: their paths, relative to dir, and contents,
// in path order. The chart's charts/ directory is left out: `helm dependency build` writes it (an
// archive with build-time mtimes) from the dependency its Chart.lock pins, and that dependency's
// content is recorded under its own name.
func Digest(dir string) (string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == filepath.Join(dir, "charts") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		paths = append(paths, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to list chart %s: %w", dir, err)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return "", err
		}
		// A hash.Hash's Write never fails.
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		_, _ = h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Problem is why a chart's version does not fit the record; Recordable problems are fixed by
// recording the current version (it is new).
type Problem struct {
	Chart, Version string
	Msg            string
	Recordable     bool
}

func (p Problem) Error() string { return fmt.Sprintf("chart %s %s: %s", p.Chart, p.Version, p.Msg) }

// Check compares a chart's current version and digest with the record.
func (r Record) Check(chart, version, digest string) *Problem {
	cur, err := semver.StrictNewVersion(version)
	if err != nil {
		return &Problem{chart, version, fmt.Sprintf("version is not semver: %v", err), false}
	}
	released := r[chart]
	if d, ok := released[version]; ok {
		if d == digest {
			return nil
		}
		return &Problem{chart, version, fmt.Sprintf("its files changed since version %s was released (%s, now %s): bump the chart's version "+
			"(make bump), then record it (make generate)", version, d, digest), false}
	}
	var older []string
	for v := range released {
		if rv, err := semver.StrictNewVersion(v); err == nil && !rv.LessThan(cur) {
			older = append(older, v)
		}
	}
	if len(older) > 0 {
		slices.Sort(older)
		return &Problem{chart, version, fmt.Sprintf("is not newer than the released %v: a new version must be greater", older), false}
	}
	return &Problem{chart, version, "is not recorded in " + RecordFile + ": run make generate", true}
}
