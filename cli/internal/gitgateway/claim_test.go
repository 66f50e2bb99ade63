package gitgateway

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/claim"
)

// poolPush is one push of the pool pod test: the ref, and "" for a push that must land or the
// text git must show for one that must be refused.
type poolPush struct{ ref, refused string }

// A pool pod's gateway (--claim-file) refuses every git request until the claim exists, then
// takes the branch from the assignment, once: a later assignment changes nothing.
func TestGitPoolPodBranchComesFromTheClaim(t *testing.T) {
	assignment := func(pushBranch string) claim.Assignment {
		a := claim.Assignment{Project: "proj", Task: "t1", Kind: "implement", Directive: "do it", RepoDir: "/workspace/demo", PushBranch: pushBranch}
		if pushBranch == "" {
			a.RepoDir = ""
		}
		return a
	}
	tests := []struct {
		name       string
		malformed  bool // a broken claim file first: refused, then replaced
		assignment claim.Assignment
		pushes     []poolPush
		// afterReclaim is pushed once the claim file names another branch, tatara/t2.
		afterReclaim poolPush
	}{
		{
			name:       "push branch",
			assignment: assignment("tatara/t1"),
			pushes: []poolPush{
				{"refs/heads/tatara/t1", ""},
				{"refs/heads/main", "refs/heads/main is outside refs/heads/tatara/t1"},
				{"refs/heads/tatara/t10", "refs/heads/tatara/t10 is outside refs/heads/tatara/t1"},
			},
			afterReclaim: poolPush{"refs/heads/tatara/t2", "refs/heads/tatara/t2 is outside refs/heads/tatara/t1"},
		},
		{
			name:         "no push branch",
			assignment:   assignment(""),
			pushes:       []poolPush{{"refs/heads/tatara/t1", "task t1 has no push branch"}},
			afterReclaim: poolPush{"refs/heads/tatara/t2", "task t1 has no push branch"},
		},
		{
			name:         "malformed claim file first",
			malformed:    true,
			assignment:   assignment("tatara/t1"),
			pushes:       []poolPush{{"refs/heads/main", "refs/heads/main is outside refs/heads/tatara/t1"}},
			afterReclaim: poolPush{"refs/heads/tatara/t1", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claimFile := filepath.Join(t.TempDir(), "assignment.json")
			f := newGitFixtureConfig(t, Config{ClaimFile: claimFile})
			addr := strings.TrimPrefix(f.gateway.URL, "http://")

			// Unclaimed: fetch and push are refused, and git shows the agent why.
			out, err := f.run("", "clone", "-q", f.gateway.URL+"/", filepath.Join(t.TempDir(), "early"))
			if err == nil || !strings.Contains(out, "not claimed yet") {
				t.Fatalf("clone before the claim: err %v, output %q; want a failure saying the pod is not claimed yet", err, out)
			}
			for _, target := range []string{"GET /info/refs?service=git-upload-pack", "GET /info/refs?service=git-receive-pack", "POST /git-upload-pack", "POST /git-receive-pack"} {
				if got := rawStatus(t, addr, target); got != http.StatusServiceUnavailable {
					t.Errorf("%s before the claim: status %d, want 503", target, got)
				}
			}
			// Not git at all is still 404.
			if got := rawStatus(t, addr, "GET /config"); got != http.StatusNotFound {
				t.Errorf("GET /config before the claim: status %d, want 404", got)
			}
			if tt.malformed {
				writeFile(t, claimFile, `{"project":`)
				out, err := f.run("", "ls-remote", f.gateway.URL+"/")
				if err == nil || !strings.Contains(out, "cannot read this pod's claim") || !strings.Contains(out, claimFile) {
					t.Fatalf("ls-remote with a malformed claim file: err %v, output %q; want a failure naming the file", err, out)
				}
				if err := os.Remove(claimFile); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(f.seenRequests()); n != 0 {
				t.Fatalf("%d requests reached the upstream before the claim, want none: %v", n, f.seenRequests())
			}

			if err := claim.WriteFile(claimFile, tt.assignment); err != nil {
				t.Fatal(err)
			}
			dir := f.clone()
			head := strings.TrimSpace(f.git(dir, "rev-parse", "HEAD"))
			push := func(p poolPush) {
				t.Helper()
				before := f.upstreamRefs()
				out, err := f.run(dir, "push", "origin", "HEAD:"+p.ref)
				if p.refused == "" {
					if err != nil {
						t.Fatalf("push to %s: %v\n%s", p.ref, err, out)
					}
					if got := strings.TrimSpace(f.git(f.bare, "rev-parse", p.ref)); got != head {
						t.Fatalf("upstream %s = %s, want %s", p.ref, got, head)
					}
					return
				}
				if err == nil || !strings.Contains(out, p.refused) {
					t.Errorf("push to %s: err %v, output %q; want a refusal saying %q", p.ref, err, out, p.refused)
				}
				if after := f.upstreamRefs(); after != before {
					t.Errorf("a refused push to %s changed the upstream:\nbefore:\n%s\nafter:\n%s", p.ref, before, after)
				}
			}
			for _, p := range tt.pushes {
				push(p)
			}
			// The claim is read once: another assignment in the file changes nothing.
			if err := claim.WriteFile(claimFile, assignment("tatara/t2")); err != nil {
				t.Fatal(err)
			}
			push(tt.afterReclaim)
			if got := strings.Count(f.logs.String(), `"msg":"pod claimed"`); got != 1 {
				t.Errorf("%d \"pod claimed\" log lines, want 1:\n%s", got, f.logs.String())
			}
			f.checkNoToken(dir)
		})
	}
}
