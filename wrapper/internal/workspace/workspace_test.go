package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ws "tatara.dev/cli/pkg/workspace"
	"tatara.dev/testkit/gitserver"
)

// gitEnv isolates a test's git from the machine's configuration.
func gitEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test"}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// sourceRepo is a bare repo with three commits on main (the last one tagged v1) and a branch
// feature; it returns its file:// URL and the first commit's id.
func sourceRepo(t *testing.T) (url, first string) {
	t.Helper()
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	for i, content := range []string{"one\n", "two\n", "three\n"} {
		if err := os.WriteFile(filepath.Join(work, "file.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, work, "add", "file.txt")
		git(t, work, "commit", "-q", "-m", content)
		if i == 0 {
			first = git(t, work, "rev-parse", "HEAD")
		}
	}
	git(t, work, "tag", "v1")
	git(t, work, "branch", "feature", first)
	bare := filepath.Join(t.TempDir(), "src.git")
	git(t, "", "clone", "-q", "--bare", work, bare)
	return "file://" + bare, first
}

func testOptions(t *testing.T, url string) Options {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{URL: url, Depth: 1, Timeout: time.Minute, Dir: filepath.Join(t.TempDir(), "workspace"),
		ScratchDir: t.TempDir(), AuthorName: "Tatara agent (t1)", AuthorEmail: "t1@p.tasks.tatara.invalid", Self: self}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

func TestPrepareClones(t *testing.T) {
	url, first := sourceRepo(t)
	tests := []struct {
		name       string
		ref        string
		depth      int
		pushURL    string
		wantFile   string
		wantCommit int // commits in the clone's history
		wantBranch string
	}{
		{"default branch, shallow", "", 1, "", "three\n", 1, "main"},
		{"branch, full history", "feature", 0, "", "one\n", 1, "feature"},
		{"tag", "v1", 2, "", "three\n", 2, ""},
		{"commit id", first, 1, "", "one\n", 1, ""},
		{"push through the gateway", "", 1, "http://127.0.0.1:7778/", "three\n", 1, "tatara/t1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, url)
			o.Ref, o.Depth, o.PushURL = tt.ref, tt.depth, tt.pushURL
			if tt.pushURL != "" {
				o.Branch = "tatara/t1"
			}
			if err := Prepare(context.Background(), o, discard()); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(o.Dir, "file.txt"))
			if err != nil || string(got) != tt.wantFile {
				t.Fatalf("file.txt = %q (%v), want %q", got, err, tt.wantFile)
			}
			if n := git(t, o.Dir, "rev-list", "--count", "HEAD"); n != string(rune('0'+tt.wantCommit)) {
				t.Errorf("history of %s commits, want %d", n, tt.wantCommit)
			}
			if b := git(t, o.Dir, "branch", "--show-current"); b != tt.wantBranch {
				t.Errorf("on branch %q, want %q", b, tt.wantBranch)
			}
			wantOrigin := url
			if tt.pushURL != "" {
				wantOrigin = tt.pushURL
			}
			if origin := git(t, o.Dir, "remote", "get-url", "origin"); origin != wantOrigin {
				t.Errorf("origin %q, want %q", origin, wantOrigin)
			}
			if email := git(t, o.Dir, "config", "user.email"); email != o.AuthorEmail {
				t.Errorf("user.email %q, want %q", email, o.AuthorEmail)
			}
		})
	}
}

// objectCount is the number of objects in the clone dir, loose and packed.
func objectCount(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(git(t, dir, "count-objects", "-v"), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "count" || k == "in-pack" {
			i, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("count-objects line %q: %v", line, err)
			}
			n += i
		}
	}
	return n
}

// TestFetchRef: a clone of the default branch, as a warm pool's pod has, checks out another ref
// afterwards, shallow as asked, receiving only the objects it lacks; a missing ref is RefNotFound.
func TestFetchRef(t *testing.T) {
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%02d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", ".")
	git(t, work, "commit", "-q", "-m", "twenty files")
	base := git(t, work, "rev-parse", "HEAD")
	git(t, work, "switch", "-q", "-c", "topic")
	if err := os.WriteFile(filepath.Join(work, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "add", "new.txt")
	git(t, work, "commit", "-q", "-m", "one more file")
	topic := git(t, work, "rev-parse", "HEAD")
	git(t, work, "tag", "v2")
	git(t, work, "switch", "-q", "main")
	bare := filepath.Join(t.TempDir(), "src.git")
	git(t, "", "clone", "-q", "--bare", work, bare)

	tests := []struct {
		name, ref, wantHead string
		wantObjects         int // received by the fetch
		wantReason          string
	}{
		{"branch: only the difference", "topic", topic, 3, ""}, // the commit, its tree, new.txt
		{"tag", "v2", topic, 3, ""},                            // a lightweight tag: the same three
		{"commit id", topic, topic, 3, ""},
		{"missing branch", "no-such-branch", "", 0, ws.RefNotFound},
		{"ref read as an option", "--upload-pack=touch /tmp/pwned", "", 0, ws.RefNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, "file://"+bare)
			if err := Prepare(context.Background(), o, discard()); err != nil {
				t.Fatal(err)
			}
			before := objectCount(t, o.Dir)
			err := FetchRef(context.Background(), o.Dir, tt.ref, 1, time.Minute, discard())
			if tt.wantReason != "" {
				if f := Failure(err); f.Reason != tt.wantReason {
					t.Fatalf("reason %s (%v), want %s", f.Reason, err, tt.wantReason)
				}
				if head := git(t, o.Dir, "rev-parse", "HEAD"); head != base {
					t.Errorf("HEAD moved to %s after a failed fetch", head)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if head := git(t, o.Dir, "rev-parse", "HEAD"); head != tt.wantHead {
				t.Errorf("HEAD %s, want %s", head, tt.wantHead)
			}
			if got := objectCount(t, o.Dir) - before; got != tt.wantObjects {
				t.Errorf("the fetch received %d objects, want %d", got, tt.wantObjects)
			}
			if n := git(t, o.Dir, "rev-list", "--count", "HEAD"); n != "1" {
				t.Errorf("history of %s commits after a fetch of depth 1, want 1", n)
			}
		})
	}
}

func TestPrepareClassifiesFailures(t *testing.T) {
	url, _ := sourceRepo(t)
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"missing branch", func(o *Options) { o.Ref = "no-such-branch" }, ws.RefNotFound},
		{"missing commit", func(o *Options) { o.Ref = strings.Repeat("ab", 20) }, ws.RefNotFound},
		{"missing repository", func(o *Options) { o.URL = "file://" + filepath.Join(t.TempDir(), "none.git") }, ws.RepoNotFound},
		{"unresolvable host", func(o *Options) { o.URL = "http://tatara-no-such-host.invalid/r.git" }, ws.Unreachable},
		{"refused connection", func(o *Options) { o.URL = "http://127.0.0.1:1/r.git" }, ws.Unreachable},
		{"no token in the Secret", func(o *Options) {
			o.URL, o.CredentialsDir, o.CredentialsSecret = "http://127.0.0.1:1/r.git", t.TempDir(), "repo-read"
		}, ws.CredentialsInvalid},
		{"ssh without known_hosts", func(o *Options) {
			o.URL, o.CredentialsDir = "git@127.0.0.1:r.git", t.TempDir()
			if err := os.WriteFile(filepath.Join(o.CredentialsDir, SSHKeyKey), []byte("key"), 0o400); err != nil {
				t.Fatal(err)
			}
		}, ws.CredentialsInvalid},
		{"credentials in the URL", func(o *Options) { o.URL = "https://u:secret-token@127.0.0.1:1/r.git" }, ws.CredentialsInvalid},
		{"ref read as an option", func(o *Options) { o.Ref = "--upload-pack=touch /tmp/pwned" }, ws.RefNotFound},
		{"no git", func(o *Options) { o.Git = "tatara-no-such-git" }, ws.GitUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, url)
			tt.mutate(&o)
			err := Prepare(context.Background(), o, discard())
			if f := Failure(err); f.Reason != tt.want {
				t.Fatalf("reason %s (%v), want %s", f.Reason, err, tt.want)
			}
		})
	}
}

// TestPrepareTimeout: a remote that never answers is cut at the timeout, helpers included.
func TestPrepareTimeout(t *testing.T) {
	// An ssh "server" that accepts and says nothing: git waits on it until killed.
	dir := t.TempDir()
	fake := filepath.Join(dir, "ssh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	o := testOptions(t, "ssh://git@127.0.0.1/r.git")
	o.Timeout = 500 * time.Millisecond
	start := time.Now()
	err := Prepare(context.Background(), o, discard())
	if f := Failure(err); f.Reason != ws.Timeout || !strings.Contains(f.Message, "did not finish within 500ms") {
		t.Fatalf("got %v, want Timeout naming the limit", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Prepare returned after %s: the timeout did not kill git's helpers", d)
	}
}

func TestClassify(t *testing.T) {
	// stderr lines of git 2.39 (LC_ALL=C) and its ssh and curl transports.
	tests := []struct{ stderr, want string }{
		{"fatal: Authentication failed for 'https://git.example.test/r.git/'", ws.AuthFailed},
		{"fatal: could not read Username for 'https://git.example.test': terminal prompts disabled", ws.AuthFailed},
		{"git@host: Permission denied (publickey).\nfatal: Could not read from remote repository.", ws.AuthFailed},
		{"fatal: unable to access 'https://h/r.git/': The requested URL returned error: 403", ws.AuthFailed},
		{"remote: Repository not found.\nfatal: repository 'https://h/r.git/' not found", ws.RepoNotFound},
		{"fatal: 'r.git' does not appear to be a git repository", ws.RepoNotFound},
		{"warning: Could not find remote branch x to clone.\nfatal: Remote branch x not found in upstream origin", ws.RefNotFound},
		{"fatal: couldn't find remote ref refs/heads/x", ws.RefNotFound},
		{"Host key verification failed.\nfatal: Could not read from remote repository.", ws.HostKeyUnknown},
		{"fatal: unable to access 'https://h/': Could not resolve host: h", ws.Unreachable},
		{"error: RPC failed; curl 28 Operation too slow. Less than 1024 bytes/sec transferred the last 30 seconds", ws.Timeout},
		{"fatal: early EOF", ws.CloneFailed},
	}
	for _, tt := range tests {
		if got := Classify(tt.stderr); got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.stderr, got, tt.want)
		}
	}
}

func TestCredentialHelper(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token-value\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, action, input, want string
		code                      int
	}{
		{"the repo's host", "get", "protocol=https\nhost=git.example.test\npath=r.git\n\n", "username=x-access-token\npassword=s3cret-token-value\n", 0},
		{"another host gets nothing", "get", "protocol=https\nhost=evil.example.test\n\n", "", 0},
		{"plain http to the host", "get", "protocol=http\nhost=git.example.test\n", "username=x-access-token\npassword=s3cret-token-value\n", 0},
		{"other protocols get nothing", "get", "protocol=ftp\nhost=git.example.test\n", "", 0},
		{"store is ignored", "store", "protocol=https\nhost=git.example.test\npassword=x\n", "", 0},
		{"malformed input", "get", "garbage\n", "", ExitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := CredentialMain([]string{"--host", "git.example.test", "--token-file", tokenFile, tt.action},
				strings.NewReader(tt.input), &out, &errOut)
			if code != tt.code || out.String() != tt.want {
				t.Fatalf("exit %d output %q (stderr %q), want %d %q", code, out.String(), errOut.String(), tt.code, tt.want)
			}
		})
	}
}

// TestMainWritesTerminationMessage: the failure reaches the operator as the termination message.
func TestMainWritesTerminationMessage(t *testing.T) {
	url, _ := sourceRepo(t)
	term := filepath.Join(t.TempDir(), "termination-log")
	var stderr bytes.Buffer
	code := Main([]string{"--url", url, "--ref", "nope", "--dir", filepath.Join(t.TempDir(), "w"),
		"--scratch-dir", t.TempDir(), "--termination-log", term}, &stderr)
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d; stderr %s", code, ExitFailed, stderr.String())
	}
	raw, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	if f := ws.ParseFailure(string(raw)); f.Reason != ws.RefNotFound || !strings.Contains(f.Message, "nope") {
		t.Fatalf("termination message %s, want RefNotFound naming the ref", raw)
	}
	if !strings.Contains(stderr.String(), `"reason":"RefNotFound"`) {
		t.Fatalf("log lacks the reason: %s", stderr.String())
	}
}

// TestMainInstallsTheWrapper: with --install-to, workspace-init copies this executable there and
// clones; an install that cannot be made fails the step with a message naming it, before any
// clone.
func TestMainInstallsTheWrapper(t *testing.T) {
	url, _ := sourceRepo(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dest     string
		wantCode int
	}{
		{"installed and cloned", filepath.Join(t.TempDir(), "wrapper"), 0},
		{"no such directory", filepath.Join(t.TempDir(), "missing", "wrapper"), ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			term := filepath.Join(t.TempDir(), "termination-log")
			dir := filepath.Join(t.TempDir(), "w")
			var stderr bytes.Buffer
			code := Main([]string{"--url", url, "--dir", dir, "--scratch-dir", t.TempDir(),
				"--termination-log", term, "--install-to", tc.dest}, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.wantCode, stderr.String())
			}
			if tc.wantCode == 0 {
				if got, err := os.ReadFile(tc.dest); err != nil || !bytes.Equal(got, want) {
					t.Errorf("the installed wrapper differs from this executable (%v)", err)
				}
				if _, err := os.Stat(filepath.Join(dir, "file.txt")); err != nil {
					t.Errorf("no clone: %v", err)
				}
				return
			}
			raw, _ := os.ReadFile(term)
			if f := ws.ParseFailure(string(raw)); f.Reason != ws.CloneFailed || !strings.Contains(f.Message, "could not be installed") {
				t.Errorf("termination message %s, want CloneFailed naming the install", raw)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Error("cloned although the install failed")
			}
		})
	}
}

// demoServer is the repo's test git server over HTTP on 127.0.0.1, with the demo repository; it
// returns the repository's URL and the read token.
func demoServer(t *testing.T) (url, readToken string) {
	t.Helper()
	srv, err := gitserver.New(gitserver.Config{Root: t.TempDir(), ReadToken: "read-token-0123456789", WriteToken: "write-token-0123456789", Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.SeedDemo(context.Background(), "demo"); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL + "/demo.git", "read-token-0123456789"
}

func credentialsDir(t *testing.T, token string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, TokenKey), []byte(token+"\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPrepareOverHTTP runs the real binary (this test's, through TestMain) as git's credential
// helper against a token-guarded server: the right token clones and is nowhere in the clone; a
// wrong one, or none, is AuthFailed with the token masked; a missing repository is RepoNotFound.
func TestPrepareOverHTTP(t *testing.T) {
	url, token := demoServer(t)
	wrong := "wrong-token-0123456789"
	tests := []struct {
		name       string
		url, token string // token "" = no credentials
		want       string // "" = success
	}{
		{"right token", url, token, ""},
		{"wrong token", url, wrong, ws.AuthFailed},
		{"no credentials", url, "", ws.AuthFailed},
		{"missing repository", strings.TrimSuffix(url, "demo.git") + "none.git", token, ws.RepoNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, tt.url)
			if tt.token != "" {
				o.CredentialsDir, o.CredentialsSecret = credentialsDir(t, tt.token), "demo-read"
			}
			var logs bytes.Buffer
			err := Prepare(context.Background(), o, slog.New(slog.NewJSONHandler(&logs, nil)))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				want, _ := gitserver.DemoFile("greeting.txt")
				if got, err := os.ReadFile(filepath.Join(o.Dir, "greeting.txt")); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("greeting.txt = %q (%v), want %q", got, err, want)
				}
				assertNotUnder(t, o.Dir, token)
				assertNotUnder(t, o.ScratchDir, token)
			} else if f := Failure(err); f.Reason != tt.want {
				t.Fatalf("reason %s (%v), want %s", f.Reason, err, tt.want)
			} else if strings.Contains(f.Message, wrong) || strings.Contains(f.Message, token) {
				t.Fatalf("the failure message carries a token: %s", f.Message)
			}
			if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), wrong) {
				t.Fatalf("a token is in the log: %s", logs.String())
			}
		})
	}
}

// assertNotUnder fails if any file under dir contains s.
func assertNotUnder(t *testing.T, dir, s string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			t.Errorf("%s contains the token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMain makes this test binary git's credential helper when git runs it as
// `<test binary> git-credential ...` (Options.Self is os.Executable()).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "git-credential" {
		os.Exit(CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
