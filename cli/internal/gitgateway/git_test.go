package gitgateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/testkit/gitserver"
	"tatara.dev/testkit/testutil"
)

// The push token of the git tests: the upstream answers 401 to any other credential.
const gitToken = "upstream-push-token-3b7e9d1f42a6"

// gitFixture is a real upstream (git http-backend over a bare repository, behind Basic auth) and
// the gateway in front of it, for the Task branch tatara/t1.
type gitFixture struct {
	t        *testing.T
	env      []string
	bare     string // the upstream's bare repository
	upstream *httptest.Server
	gateway  *httptest.Server
	logs     *testutil.SyncBuffer
	reg      *prometheus.Registry

	mu      sync.Mutex
	seen    []seenRequest // what reached the upstream
	chunked int           // requests with a chunked body that reached the upstream
}

type seenRequest struct {
	method, uri, auth, cookie string
}

// newGitFixture seeds the upstream with three commits on main (the demo repository's and two
// more) and, for each of branches, a branch at main's tip.
func newGitFixture(t *testing.T, maxPushBytes int64, branches ...string) *gitFixture {
	t.Helper()
	return newGitFixtureConfig(t, Config{BranchPrefix: "tatara/t1", MaxPushBytes: maxPushBytes}, branches...)
}

// newGitFixtureConfig is newGitFixture with the gateway's branch settings and size limit from
// cfg; the rest of the config is the fixture's.
func newGitFixtureConfig(t *testing.T, cfg Config, branches ...string) *gitFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests drive the real git client, which is not on PATH: %v", err)
	}
	f := &gitFixture{t: t, logs: &testutil.SyncBuffer{}, reg: prometheus.NewRegistry()}
	home := t.TempDir()
	f.env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") &&
			!strings.HasPrefix(kv, "SSH_ASKPASS=") {
			f.env = append(f.env, kv)
		}
	}

	// The upstream is the repository's test git server; the push token is its write token.
	srv, err := gitserver.New(gitserver.Config{Root: t.TempDir(), ReadToken: "upstream-read-token-5c1a", WriteToken: gitToken,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.SeedDemo(context.Background(), "demo"); err != nil {
		t.Fatal(err)
	}
	f.bare = filepath.Join(srv.Root(), "demo.git")
	seed := filepath.Join(t.TempDir(), "seed")
	f.git("", "clone", "-q", f.bare, seed)
	for i, content := range []string{"one\n", "two\n"} {
		writeFile(t, filepath.Join(seed, "README"), content)
		f.git(seed, "add", "README")
		f.git(seed, "commit", "-q", "-m", "commit "+string(rune('2'+i)))
	}
	f.git(seed, "push", "-q", f.bare, "main")
	for _, b := range branches {
		f.git(seed, "push", "-q", f.bare, "main:refs/heads/"+b)
	}

	backend := srv.Handler()
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Cookie")})
		if r.ContentLength < 0 {
			f.chunked++ // git sends a push over http.postBuffer chunked
		}
		f.mu.Unlock()
		if user, _, ok := r.BasicAuth(); !ok || user != DefaultUsername {
			w.Header().Set("WWW-Authenticate", `Basic realm="upstream"`)
			http.Error(w, "authentication required as "+DefaultUsername, http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(f.upstream.Close)

	u, err := url.Parse(f.upstream.URL + "/demo.git")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream, cfg.Token, cfg.Registerer = u, gitToken, f.reg
	h, err := NewHandler(cfg, slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	f.gateway = httptest.NewServer(h)
	t.Cleanup(f.gateway.Close)
	return f
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs git in dir and returns its combined output and error.
func (f *gitFixture) run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// git runs git in dir and fails the test if it fails.
func (f *gitFixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.run(dir, args...)
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// clone makes a shallow clone through the gateway, as the agent's workspace is, and commits to it.
func (f *gitFixture) clone() string {
	f.t.Helper()
	dir := filepath.Join(f.t.TempDir(), "workspace")
	f.git("", "clone", "-q", "--depth", "1", f.gateway.URL+"/", dir)
	if got := strings.TrimSpace(f.git(dir, "rev-parse", "--is-shallow-repository")); got != "true" {
		f.t.Fatalf("the clone is not shallow: %s", got)
	}
	writeFile(f.t, filepath.Join(dir, "work.txt"), "the agent's work\n")
	f.git(dir, "add", "work.txt")
	f.git(dir, "commit", "-q", "-m", "agent work")
	return dir
}

// upstreamRefs lists the upstream's refs and their objects.
func (f *gitFixture) upstreamRefs() string {
	f.t.Helper()
	return f.git(f.bare, "for-each-ref", "--format=%(refname) %(objectname)")
}

// checkNoToken fails if the token, or the Basic credential made of it, is in the log or in any
// file of dir.
func (f *gitFixture) checkNoToken(dir string) {
	f.t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte(DefaultUsername + ":" + gitToken))
	for _, secret := range []string{gitToken, basic} {
		if strings.Contains(f.logs.String(), secret) {
			f.t.Errorf("the gateway's log holds the token:\n%s", f.logs.String())
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.Contains(string(cfg), f.gateway.URL) {
		f.t.Errorf(".git/config has no remote at the gateway:\n%s", cfg)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, secret := range []string{gitToken, basic} {
			if strings.Contains(string(b), secret) {
				f.t.Errorf("%s holds the token", path)
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// The agent's shallow clone pushes to its Task's branch and below it; the upstream gets the
// commit, and the token shows up neither in the clone nor in the log.
func TestGitPushToTaskBranch(t *testing.T) {
	for _, tt := range []struct {
		name, ref string
		bigFile   bool // a pack over git's http.postBuffer: a probe request, then a chunked body
	}{
		{name: "branch", ref: "refs/heads/tatara/t1"},
		{name: "under the branch", ref: "refs/heads/tatara/t1/x"},
		{name: "large push", ref: "refs/heads/tatara/t1", bigFile: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newGitFixture(t, 0)
			dir := f.clone()
			if tt.bigFile {
				writeFile(t, filepath.Join(dir, "big.bin"), rand.Text()+string(randomBytes(t, 3<<20)))
				f.git(dir, "add", "big.bin")
				f.git(dir, "commit", "-q", "-m", "big")
			}
			head := strings.TrimSpace(f.git(dir, "rev-parse", "HEAD"))
			out, err := f.run(dir, "push", "origin", "HEAD:"+tt.ref)
			if err != nil {
				t.Fatalf("push: %v\n%s\nlog:\n%s", err, out, f.logs.String())
			}
			if got := strings.TrimSpace(f.git(f.bare, "rev-parse", tt.ref)); got != head {
				t.Fatalf("upstream %s = %s, want %s; push said:\n%s", tt.ref, got, head, out)
			}
			f.mu.Lock()
			chunked := f.chunked
			f.mu.Unlock()
			if tt.bigFile != (chunked > 0) {
				t.Errorf("%d chunked requests reached the upstream; want some only for the large push", chunked)
			}
			if got := counterValue(t, f.reg, OutcomeAccepted); got != 1 {
				t.Errorf("accepted pushes = %v, want 1", got)
			}
			if !strings.Contains(f.logs.String(), `"msg":"git push accepted"`) || !strings.Contains(f.logs.String(), tt.ref) {
				t.Errorf("no INFO line for the accepted push of %s:\n%s", tt.ref, f.logs.String())
			}
			// Fetching back through the gateway works too.
			f.git(dir, "fetch", "-q", "origin", tt.ref)
			f.checkNoToken(dir)
		})
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// Every push outside the Task's branch, and every deletion, fails as a whole; the upstream's
// refs stay as they were.
func TestGitRefusedPushesLeaveUpstreamUnchanged(t *testing.T) {
	f := newGitFixture(t, 0, "tatara/t1", "tatara/t10")
	dir := f.clone()
	f.git(dir, "tag", "v1")
	tests := []struct {
		name     string
		refspecs []string
		refused  string // the ref the gateway's log names
	}{
		{"main", []string{"HEAD:refs/heads/main"}, "refs/heads/main"},
		{"prefix must match a whole component", []string{"HEAD:refs/heads/tatara/t10"}, "refs/heads/tatara/t10"},
		{"parent of the branch", []string{"HEAD:refs/heads/tatara/t"}, "refs/heads/tatara/t"},
		{"tag", []string{"refs/tags/v1"}, "refs/tags/v1"},
		{"tag named like the branch", []string{"refs/tags/v1:refs/tags/tatara/t1"}, "refs/tags/tatara/t1"},
		{"deletion", []string{":refs/heads/tatara/t1"}, "refs/heads/tatara/t1"},
		{"deletion with --delete", []string{"--delete", "tatara/t1"}, "refs/heads/tatara/t1"},
		{"forced update outside", []string{"+HEAD:refs/heads/tatara/t10"}, "refs/heads/tatara/t10"},
		{"one bad ref refuses the whole push", []string{"HEAD:refs/heads/tatara/t1/ok", "HEAD:refs/heads/main"}, "refs/heads/main"},
		{"atomic push with a bad ref", []string{"--atomic", "HEAD:refs/heads/tatara/t1", "HEAD:refs/heads/other"}, "refs/heads/other"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.upstreamRefs()
			out, err := f.run(dir, append([]string{"push", "origin"}, tt.refspecs...)...)
			if err == nil {
				t.Fatalf("push %v succeeded:\n%s", tt.refspecs, out)
			}
			t.Logf("git push %s:\n%s", strings.Join(tt.refspecs, " "), out)
			if after := f.upstreamRefs(); after != before {
				t.Fatalf("upstream refs changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			// git shows the agent why, per ref, from the gateway's report-status.
			if !strings.Contains(out, "! [remote rejected] ") ||
				!strings.Contains(out, tt.refused+" is outside refs/heads/tatara/t1") && !strings.Contains(out, tt.refused+" would be deleted") {
				t.Errorf("git's output does not show the gateway's reason for %s:\n%s", tt.refused, out)
			}
			if got := counterValue(t, f.reg, OutcomeRefused); got != float64(i+1) {
				t.Errorf("refused pushes = %v, want %d", got, i+1)
			}
			if !strings.Contains(lastLogLine(f.logs.String(), "git push refused"), tt.refused) {
				t.Errorf("the WARN line does not name %s:\n%s", tt.refused, f.logs.String())
			}
		})
	}
	if got := counterValue(t, f.reg, OutcomeAccepted); got != 0 {
		t.Errorf("accepted pushes = %v, want 0", got)
	}
	f.checkNoToken(dir)
}

func lastLogLine(logs, msg string) string {
	last := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) && strings.Contains(l, `"level":"WARN"`) {
			last = l
		}
	}
	return last
}

// A push over --max-push-bytes fails and changes nothing upstream.
func TestGitPushOverSizeLimit(t *testing.T) {
	f := newGitFixture(t, 256<<10)
	dir := f.clone()
	writeFile(t, filepath.Join(dir, "big.bin"), string(randomBytes(t, 1<<20)))
	f.git(dir, "add", "big.bin")
	f.git(dir, "commit", "-q", "-m", "big")
	before := f.upstreamRefs()
	out, err := f.run(dir, "push", "origin", "HEAD:refs/heads/tatara/t1")
	if err == nil {
		t.Fatalf("push over the limit succeeded:\n%s", out)
	}
	t.Logf("git push over the limit:\n%s", out)
	if after := f.upstreamRefs(); after != before {
		t.Fatalf("upstream refs changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Only the four smart-HTTP requests reach the upstream; nothing else does, whatever the path.
func TestGitOnlySmartHTTPIsForwarded(t *testing.T) {
	f := newGitFixture(t, 0)
	addr := strings.TrimPrefix(f.gateway.URL, "http://")
	for _, target := range []string{
		"GET /../other.git/info/refs?service=git-upload-pack",
		"GET /demo.git/../../other.git/info/refs?service=git-upload-pack",
		"GET /demo.git/info/refs?service=git-upload-pack",
		"GET //info/refs?service=git-upload-pack",
		"GET /info/refs/?service=git-upload-pack",
		"GET /info%2Frefs?service=git-upload-pack",
		"GET /./info/refs?service=git-upload-pack",
		"GET /info/refs",
		"GET /info/refs?service=git-upload-archive",
		"GET /info/refs?service=git-upload-pack&service=git-receive-pack",
		"GET /info/refs?service=git-upload-pack;x",
		"GET /HEAD",
		"GET /objects/info/packs",
		"GET /objects/info/alternates",
		"GET /objects/12/3456789012345678901234567890123456789",
		"GET /config",
		"GET /",
		"GET http://evil.example.com/info/refs?service=x",
		"POST /info/refs?service=git-upload-pack",
		"GET /git-upload-pack",
		"GET /git-receive-pack",
		"PUT /git-receive-pack",
		"HEAD /info/refs?service=git-upload-pack",
		"POST /git-receive-pack/../git-upload-pack",
		"POST /git-upload-archive",
	} {
		t.Run(target, func(t *testing.T) {
			if got := rawStatus(t, addr, target); got != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", target, got)
			}
		})
	}
	if n := len(f.seenRequests()); n != 0 {
		t.Errorf("%d requests reached the upstream, want none: %v", n, f.seenRequests())
	}
	// The allowed request, with the client's own credential and cookie: the upstream sees the
	// gateway's credential only.
	req, _ := http.NewRequest(http.MethodGet, f.gateway.URL+"/info/refs?service=git-upload-pack", nil)
	req.SetBasicAuth(DefaultUsername, "the-agents-own-guess")
	req.Header.Set("Cookie", "session=agent")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("info/refs through the gateway: %d", resp.StatusCode)
	}
	seen := f.seenRequests()
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(DefaultUsername+":"+gitToken))
	if len(seen) != 1 || seen[0].auth != want || seen[0].cookie != "" || seen[0].uri != "/demo.git/info/refs?service=git-upload-pack" {
		t.Errorf("upstream saw %+v, want one GET /demo.git/info/refs?service=git-upload-pack with the gateway's credential and no cookie", seen)
	}
	// Straight to the upstream, without the gateway, the client is refused: the credential
	// really is the gateway's.
	out, err := f.run("", "ls-remote", f.upstream.URL+"/demo.git")
	if err == nil {
		t.Fatalf("ls-remote straight to the upstream succeeded:\n%s", out)
	}
}

func (f *gitFixture) seenRequests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// rawStatus sends "METHOD target" as written (no client-side path cleaning) and returns the
// status code.
func rawStatus(t *testing.T, addr, requestLine string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := ""
	if strings.HasPrefix(requestLine, "POST ") || strings.HasPrefix(requestLine, "PUT ") {
		body = "0000"
	}
	if _, err := conn.Write([]byte(requestLine + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.Fields(requestLine)[0]})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A hand-made push whose capability list ends at a second NUL (git ignores what follows it) asks
// the real upstream for push options, with options a GitLab-style host would act on. Sent
// straight to the upstream, its pre-receive hook sees them: the request is what git honours.
// Through the gateway, it is refused and the hook never runs.
func TestGitPushOptionsNeverReachTheUpstream(t *testing.T) {
	f := newGitFixture(t, 0)
	f.git(f.bare, "config", "receive.advertisePushOptions", "true")
	seen := filepath.Join(t.TempDir(), "push-options")
	hook := "#!/bin/sh\nenv | grep '^GIT_PUSH_OPTION' >> " + seen + "\n"
	if err := os.WriteFile(filepath.Join(f.bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	mainTip := strings.TrimSpace(f.git(f.bare, "rev-parse", "refs/heads/main"))
	emptyPack, err := exec.Command("git", "pack-objects", "--stdout").Output()
	if err != nil {
		t.Fatal(err)
	}
	body := func(ref string) []byte {
		return []byte(cmds(strings.Repeat("0", 40)+" "+mainTip+" "+ref+"\x00report-status push-options\x00x") +
			pkt("merge_request.create") + pkt("merge_request.target=main") + "0000" + string(emptyPack))
	}
	post := func(url string, b []byte) string {
		req, err := http.NewRequest(http.MethodPost, url+"/git-receive-pack", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		req.SetBasicAuth(DefaultUsername, gitToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}

	// The control: git honours the hidden capability and hands the options to the hook.
	post(f.upstream.URL+"/demo.git", body("refs/heads/control"))
	got, err := os.ReadFile(seen)
	if err != nil || !strings.Contains(string(got), "GIT_PUSH_OPTION_0=merge_request.create") {
		t.Fatalf("the upstream's hook did not see the options sent to it directly (%v): %q; the test proves nothing", err, got)
	}
	if err := os.Remove(seen); err != nil {
		t.Fatal(err)
	}

	before := f.upstreamRefs()
	out := post(f.gateway.URL, body("refs/heads/tatara/t1"))
	if !strings.Contains(out, "ng refs/heads/tatara/t1 push options (git push -o) are not supported") {
		t.Errorf("the gateway's answer does not refuse the push options: %q", out)
	}
	if _, err := os.Stat(seen); !os.IsNotExist(err) {
		b, _ := os.ReadFile(seen)
		t.Errorf("the upstream's pre-receive hook ran with %q", b)
	}
	if after := f.upstreamRefs(); after != before {
		t.Errorf("upstream refs changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
