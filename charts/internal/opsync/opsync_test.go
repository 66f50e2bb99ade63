package opsync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const role = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: tatara-operator
rules:
- apiGroups: [""]
  resources: [configmaps, pods]
  verbs: [get, list, watch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, update]
- apiGroups: [tatara.dev]
  resources: [tasks]
  verbs: [get]
`

func TestClusterRulesNarrowsConfigMapsAndLeases(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, RoleSource, role)
	cluster, namespaced, err := ClusterRules(root)
	if err != nil {
		t.Fatal(err)
	}
	var got, gotNS []string
	for _, r := range cluster {
		got = append(got, strings.Join(r.Resources, "+"))
	}
	for _, r := range namespaced {
		gotNS = append(gotNS, strings.Join(r.Resources, "+"))
	}
	if strings.Join(got, ",") != "pods,tasks" || strings.Join(gotNS, ",") != "configmaps,leases" {
		t.Errorf("cluster rules %v, namespaced %v; want [pods tasks] and [configmaps leases]", got, gotNS)
	}
}

func TestCheckNamesStaleFilesAndWriteFixesThem(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, RoleSource, role)
	writeFile(t, root, CRDSource+"/tatara.dev_tasks.yaml", "kind: CustomResourceDefinition\n")
	writeFile(t, root, CRDTarget+"/tatara.dev_old.yaml", "old\n")

	err := Check(root)
	if err == nil {
		t.Fatal("Check passed on a stale chart")
	}
	for _, want := range []string{"make generate", CRDTarget + "/tatara.dev_tasks.yaml is missing", RulesTarget + " is missing", "tatara.dev_old.yaml has no source"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := Write(root); err != nil {
		t.Fatal(err)
	}
	if err := Check(root); err != nil {
		t.Errorf("Check after Write: %v", err)
	}
	writeFile(t, root, CRDSource+"/tatara.dev_tasks.yaml", "kind: CustomResourceDefinition # changed\n")
	if err := Check(root); err == nil || !strings.Contains(err.Error(), "tatara.dev_tasks.yaml differs from its source") {
		t.Errorf("Check after a CRD change = %v", err)
	}
}

func TestWantFailsWithoutSources(t *testing.T) {
	if _, err := Want(t.TempDir()); err == nil || !strings.Contains(err.Error(), CRDSource) {
		t.Errorf("Want on an empty tree = %v, want an error naming %s", err, CRDSource)
	}
}
