package releasecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"tatara.dev/operator/config/crd/bases"
)

// editBuiltCRD, when set, changes each embedded CRD the way this build's chart does: only the
// e2e suite's upgrade build sets it (upgradeprobe_e2e.go, build tag e2eupgrade).
var editBuiltCRD func(*apiextensionsv1.CustomResourceDefinition) error

// BuiltCRDs are the CRDs this operator build was generated with.
func BuiltCRDs() ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := fs.ReadFile(bases.FS, f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			return nil, fmt.Errorf("embedded CRD %s: %w", f, err)
		}
		if editBuiltCRD != nil {
			if err := editBuiltCRD(&crd); err != nil {
				return nil, fmt.Errorf("embedded CRD %s: %w", f, err)
			}
		}
		out = append(out, crd)
	}
	return out, nil
}

// crdsMatch fails when a cluster CRD's versions or schemas differ from the build's, naming the
// first field that differs: Helm installs a chart's crds/ once and never upgrades them, so a
// pipeline can upgrade the operator and leave the cluster validating (or pruning) against an
// older schema.
func crdsMatch(ctx context.Context, client apiextensions.Interface, want []apiextensionsv1.CustomResourceDefinition) error {
	if client == nil || len(want) == 0 {
		return errors.New("nothing to compare: no client for CRDs or no CRDs embedded in this build")
	}
	var problems []string
	for _, w := range want {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, explain(err, "CRD "+w.Name).Error())
			continue
		}
		if d := crdDiff(w, *got); d != "" {
			problems = append(problems, fmt.Sprintf("CRD %s differs from this operator's (%s): %s", w.Name, "upgrade the CRDs with the chart", d))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// crdDiff is the first difference of versions or schemas between the build's CRD and the
// cluster's, as "<path>: <what>", or "".
func crdDiff(want, got apiextensionsv1.CustomResourceDefinition) string {
	names := func(c apiextensionsv1.CustomResourceDefinition) []string {
		var out []string
		for _, v := range c.Spec.Versions {
			out = append(out, v.Name)
		}
		return out
	}
	if !slices.Equal(names(want), names(got)) {
		return fmt.Sprintf("versions: the build has %v, the cluster %v", names(want), names(got))
	}
	for i, wv := range want.Spec.Versions {
		gv := got.Spec.Versions[i]
		if wv.Served != gv.Served || wv.Storage != gv.Storage {
			return fmt.Sprintf("version %s: served/storage %t/%t in the build, %t/%t in the cluster", wv.Name, wv.Served, wv.Storage, gv.Served, gv.Storage)
		}
		var ws, gs any
		if wv.Schema != nil {
			ws = generic(wv.Schema.OpenAPIV3Schema)
		}
		if gv.Schema != nil {
			gs = generic(gv.Schema.OpenAPIV3Schema)
		}
		if d := diff("spec.versions["+wv.Name+"].schema.openAPIV3Schema", ws, gs); d != "" {
			return d
		}
	}
	return ""
}

// generic is v as plain JSON values (maps, slices, strings, numbers, bools).
func generic(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return out
}

// diff is the first difference between want (the build) and got (the cluster) below path.
func diff(path string, want, got any) string {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			wv, inW := wm[k]
			gv, inG := gm[k]
			switch {
			case !inG:
				return path + "." + k + ": in this operator's CRD, not in the cluster's"
			case !inW:
				return path + "." + k + ": in the cluster's CRD, not in this operator's"
			}
			if d := diff(path+"."+k, wv, gv); d != "" {
				return d
			}
		}
		return ""
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		return fmt.Sprintf("%s: this operator's CRD has %s, the cluster's %s", path, short(wj), short(gj))
	}
	return ""
}

func short(b []byte) string {
	const limit = 120
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
