package gitgateway

import (
	"os/exec"
	"strings"
	"testing"
)

var refNameCases = []struct {
	name  string
	valid bool
}{
	{"refs/heads/tatara/t1", true},
	{"refs/heads/tatara/t1/x", true},
	{"refs/heads/tatara/my-task.v2", true},
	{"refs/heads/caf\xc3\xa9", true},
	{"refs/heads/a@b", true},
	{"", false},
	{"@", false},
	{"main", false},
	{"/refs/heads/x", false},
	{"refs/heads/x/", false},
	{"refs//heads/x", false},
	{"refs/heads/x.", false},
	{"refs/heads/x..y", false},
	{"refs/heads/../main", false},
	{"refs/heads/.hidden", false},
	{"refs/heads/x.lock", false},
	{"refs/heads/x.lock/y", false},
	{"refs/heads/a@{1}", false},
	{"refs/heads/a b", false},
	{"refs/heads/a\tb", false},
	{"refs/heads/a\x7fb", false},
	{"refs/heads/a~1", false},
	{"refs/heads/a^", false},
	{"refs/heads/a:b", false},
	{"refs/heads/a?", false},
	{"refs/heads/a*", false},
	{"refs/heads/a[b", false},
	{"refs/heads/a\\b", false},
}

func TestCheckRefFormat(t *testing.T) {
	for _, tt := range refNameCases {
		err := checkRefFormat(tt.name)
		if (err == nil) != tt.valid {
			t.Errorf("checkRefFormat(%q) = %v, want valid=%t", tt.name, err, tt.valid)
		}
	}
}

// The rules agree with git's own `git check-ref-format` on every case.
func TestCheckRefFormatAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	for _, tt := range refNameCases {
		if strings.ContainsRune(tt.name, 0) {
			continue
		}
		gitValid := exec.Command(git, "check-ref-format", tt.name).Run() == nil
		if gitValid != (checkRefFormat(tt.name) == nil) {
			t.Errorf("%q: git says valid=%t, checkRefFormat says %v", tt.name, gitValid, checkRefFormat(tt.name))
		}
	}
}

func TestCheckBranchPrefix(t *testing.T) {
	for _, tt := range []struct {
		prefix  string
		wantErr string
	}{
		{"tatara/my-task", ""},
		{"tatara/t1", ""},
		{"work", ""},
		{"", "branch prefix is empty"},
		{"-x", "begins with -"},
		{"/tatara/t1", "begins with /"},
		{"tatara/t1/", "ends with /"},
		{"tatara/../main", `contains ".."`},
		{"tatara/t@{1}", `contains "@{"`},
		{"tatara/t1.lock", "ending with .lock"},
		{"tatara/t 1", `contains ' '`},
		{"tatara/t1\n", "control character"},
		{"tatara/t~1", `contains '~'`},
		{"tatara/t^1", `contains '^'`},
		{"tatara/t:1", `contains ':'`},
		{"tatara/t?1", `contains '?'`},
		{"tatara/t*", `contains '*'`},
		{"tatara/t[1", `contains '['`},
		{"tatara\\t1", `contains '\\'`},
		{"HEAD", "not allowed"},
	} {
		err := checkBranchPrefix(tt.prefix)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("checkBranchPrefix(%q) = %v, want nil", tt.prefix, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("checkBranchPrefix(%q) = %v, want an error containing %q", tt.prefix, err, tt.wantErr)
		}
	}
}
