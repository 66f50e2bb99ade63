package integration

import (
	"strings"
	"testing"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestSubtaskRef: an implement Task hands part of its work to an implement subtask that starts
// from the branch it pushed; the child's clone starts from that ref. A ref git could read as an
// option is refused by the CRD, naming the field, and nothing is created. (A review's ref is the
// operator's: TestReviewSubtaskDirectiveIsTheOperators.)
func TestSubtaskRef(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	parent := newTask(t, ns, "impl", "p", tatarav1.KindImplement)
	tok := token(t, ns, parent.Name)
	path := "/api/v1/tasks/" + parent.Name + "/subtasks"

	r := call(t, op.url, "POST", path, tok, `{"kind":"implement","repo":"operator","directive":"finish the tests on my branch","ref":"tatara/impl"}`)
	if r.code != 201 {
		t.Fatalf("subtask_create with a ref = %d %s", r.code, r.raw)
	}
	child := getTask(t, ns, r.body["name"].(string))
	if child.Spec.Ref != "tatara/impl" || child.Spec.Repo != "operator" {
		t.Fatalf("child spec repo %q ref %q, want operator at tatara/impl", child.Spec.Repo, child.Spec.Ref)
	}

	before := countTasks(t, ns)
	r = call(t, op.url, "POST", path, tok, `{"kind":"implement","repo":"operator","directive":"d","ref":"--upload-pack=touch /tmp/x"}`)
	if r.code != 400 || !strings.Contains(r.raw, "spec.ref") {
		t.Fatalf("subtask_create with an option-like ref = %d %s, want 400 naming spec.ref", r.code, r.raw)
	}
	if n := countTasks(t, ns); n != before {
		t.Fatalf("%d Tasks after a refused create, want %d", n, before)
	}
}
