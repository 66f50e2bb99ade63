package gitserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	readToken  = "read-0123456789"
	writeToken = "write-9876543210"
	// testMaxBody is the max-request-bytes limit of the test servers: big enough for the pushes
	// of the tests, small enough to go over cheaply.
	testMaxBody = 1 << 20
)

func TestReadTokenFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
		wantErr string
	}{
		{name: "trailing newline trimmed", content: "s3cret\n", want: "s3cret"},
		{name: "CRLF trimmed", content: "s3cret\r\n", want: "s3cret"},
		{name: "no newline", content: "s3cret", want: "s3cret"},
		{name: "inner spaces kept", content: " a b \n", want: " a b "},
		{name: "empty", content: "", wantErr: "is empty"},
		{name: "only a newline", content: "\n", wantErr: "is empty"},
		{name: "two lines", content: "a\nb\n", wantErr: "more than one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadTokenFile(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ReadTokenFile = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := ReadTokenFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing token file was read")
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{name: "demo"},
		{name: "team/demo_2.x"},
		{name: "feature/a-b"},
		{name: "", wantErr: "is empty"},
		{name: "..", wantErr: `contains ".."`},
		{name: "a/../b", wantErr: `contains ".."`},
		{name: "a..b", wantErr: `contains ".."`},
		{name: "-rf", wantErr: `starts with "-"`},
		{name: "a/--upload-pack", wantErr: `starts with "-"`},
		{name: "/abs", wantErr: "empty or"},
		{name: "a//b", wantErr: "empty or"},
		{name: "a/", wantErr: "empty or"},
		{name: "./a", wantErr: "empty or"},
		{name: "a b", wantErr: "outside [A-Za-z0-9._/-]"},
		{name: "a:b", wantErr: "outside"},
		{name: "a^{tree}", wantErr: "outside"},
		{name: "é", wantErr: "outside"},
		{name: strings.Repeat("a", MaxNameBytes+1), wantErr: "256-byte name limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidName("ref", tt.name)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "no root", cfg: Config{ReadToken: "r", WriteToken: "w"}, wantErr: "no repository root"},
		{name: "no read token", cfg: Config{Root: t.TempDir(), WriteToken: "w"}, wantErr: "both a read token and a write token"},
		{name: "no write token", cfg: Config{Root: t.TempDir(), ReadToken: "r"}, wantErr: "both a read token and a write token"},
		{name: "same tokens", cfg: Config{Root: t.TempDir(), ReadToken: "t", WriteToken: "t"}, wantErr: "are the same"},
		{name: "negative limit", cfg: Config{Root: t.TempDir(), ReadToken: "r", WriteToken: "w", MaxRequestBytes: -1}, wantErr: "max-request-bytes limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// syncBuffer is a log destination the handler goroutines write to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	*httptest.Server
	srv  *Server
	logs *syncBuffer
}

// newTestServer serves a root with the demo repository on 127.0.0.1.
func newTestServer(t *testing.T) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	srv, err := New(Config{Root: filepath.Join(t.TempDir(), "repos"), ReadToken: readToken, WriteToken: writeToken,
		MaxRequestBytes: testMaxBody, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if created, err := srv.SeedDemo(context.Background(), "demo"); err != nil || !created {
		t.Fatalf("SeedDemo = %t, %v", created, err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testServer{Server: ts, srv: srv, logs: logs}
}

func TestSeedDemo(t *testing.T) {
	a, b := newTestServer(t), newTestServer(t)
	ha, hb := branchesOf(t, a, "demo"), branchesOf(t, b, "demo")
	if len(ha) != 2 || ha[DemoBranch] == "" || ha[HostileSettingsBranch] == "" || ha[DemoBranch] != hb[DemoBranch] || ha[HostileSettingsBranch] != hb[HostileSettingsBranch] {
		t.Fatalf("branches %v and %v: want branches %s and %s with the same commits on both", ha, hb, DemoBranch, HostileSettingsBranch)
	}
	git := exec.Command("git", "--git-dir", filepath.Join(a.srv.Root(), "demo.git"), "show", HostileSettingsBranch+":"+HostileSettingsPath)
	if out, err := git.Output(); err != nil || string(out) != HostileSettings {
		t.Fatalf("%s on %s = %q, %v; want HostileSettings", HostileSettingsPath, HostileSettingsBranch, out, err)
	}
	if !json.Valid([]byte(HostileSettings)) {
		t.Fatal("HostileSettings is not JSON: the agent CLI would ignore it, and the e2e that proves it is not read would prove nothing")
	}
	created, err := a.srv.SeedDemo(context.Background(), "demo")
	if err != nil || created {
		t.Fatalf("SeedDemo of an existing repository = %t, %v; want false, nil", created, err)
	}
	head, err := os.ReadFile(filepath.Join(a.srv.Root(), "demo.git", "HEAD"))
	if err != nil || string(head) != "ref: refs/heads/main\n" {
		t.Fatalf("HEAD = %q, %v", head, err)
	}
	if entries, _ := filepath.Glob(filepath.Join(a.srv.Root(), ".seed-*")); len(entries) != 0 {
		t.Errorf("seeding left %v behind", entries)
	}
	if _, err := a.srv.SeedDemo(context.Background(), "../x"); err == nil {
		t.Error("SeedDemo took ../x")
	}
}

func basic(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+token))
}

func TestHTTP(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct {
		name       string
		method     string
		path       string
		token      string
		body       io.Reader
		length     int64 // -1: chunked
		header     map[string]string
		wantCode   int
		wantBody   string
		wantHeader map[string]string
	}{
		{name: "healthz needs no token", method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "branches without a token", method: "GET", path: "/-/branches/demo", wantCode: 401,
			wantHeader: map[string]string{"WWW-Authenticate": `Basic realm="tatara-e2e-git"`}},
		{name: "show without a token", method: "GET", path: "/-/show/demo?ref=main&path=README.md", wantCode: 401},
		{name: "branches with a wrong token", method: "GET", path: "/-/branches/demo", token: "nope", wantCode: 401},
		{name: "branches with the read token", method: "GET", path: "/-/branches/demo", token: readToken, wantCode: 200, wantBody: `"main":"`},
		{name: "branches with the read token in the token header", method: "GET", path: "/-/branches/demo", header: map[string]string{TokenHeader: readToken},
			wantCode: 200, wantBody: `"main"`},
		{name: "branches with a wrong token in the token header", method: "GET", path: "/-/branches/demo", header: map[string]string{TokenHeader: "nope"}, wantCode: 401},
		{name: "branches with the write token", method: "GET", path: "/-/branches/demo.git", token: writeToken, wantCode: 200, wantBody: `"main"`},
		{name: "branches of an unknown repository", method: "GET", path: "/-/branches/nope", token: readToken, wantCode: 404, wantBody: "repository nope not found"},
		{name: "show a file", method: "GET", path: "/-/show/demo?ref=main&path=greeting.txt", token: readToken, wantCode: 200, wantBody: "Hello from the demo repository.\n"},
		{name: "show an unknown branch", method: "GET", path: "/-/show/demo?ref=nope&path=greeting.txt", token: readToken, wantCode: 404, wantBody: "branch nope not found"},
		{name: "show an unknown path", method: "GET", path: "/-/show/demo?ref=main&path=nope.txt", token: readToken, wantCode: 404, wantBody: "path nope.txt not found"},
		{name: "show a ref that looks like an option", method: "GET", path: "/-/show/demo?ref=--all&path=greeting.txt", token: readToken, wantCode: 400, wantBody: `starts with "-"`},
		{name: "show a path with ..", method: "GET", path: "/-/show/demo?ref=main&path=../x", token: readToken, wantCode: 400, wantBody: `contains ".."`},
		{name: "show without a path", method: "GET", path: "/-/show/demo?ref=main", token: readToken, wantCode: 400, wantBody: "path is empty"},
		{name: "show a revision expression", method: "GET", path: "/-/show/demo?ref=main~1&path=greeting.txt", token: readToken, wantCode: 400, wantBody: "outside"},
		{name: "unknown inspection route", method: "GET", path: "/-/nope", token: readToken, wantCode: 404, wantBody: "is not served"},
		{name: "fetch refs with the read token", method: "GET", path: "/demo.git/info/refs?service=git-upload-pack", token: readToken, wantCode: 200,
			wantHeader: map[string]string{"Content-Type": "application/x-git-upload-pack-advertisement"}},
		{name: "fetch refs without .git", method: "GET", path: "/demo/info/refs?service=git-upload-pack", token: readToken, wantCode: 200},
		{name: "fetch refs with the token header only", method: "GET", path: "/demo.git/info/refs?service=git-upload-pack",
			header: map[string]string{TokenHeader: readToken}, wantCode: 401},
		{name: "fetch refs without a token", method: "GET", path: "/demo.git/info/refs?service=git-upload-pack", wantCode: 401},
		{name: "push refs with the read token", method: "GET", path: "/demo.git/info/refs?service=git-receive-pack", token: readToken, wantCode: 403, wantBody: "write token"},
		{name: "push pack with the read token", method: "POST", path: "/demo.git/git-receive-pack", token: readToken, body: strings.NewReader("0000"), length: 4, wantCode: 403},
		{name: "push refs with the write token", method: "GET", path: "/demo.git/info/refs?service=git-receive-pack", token: writeToken, wantCode: 200,
			wantHeader: map[string]string{"Content-Type": "application/x-git-receive-pack-advertisement"}},
		{name: "unknown repository", method: "GET", path: "/nope.git/info/refs?service=git-upload-pack", token: readToken, wantCode: 404, wantBody: "repository nope not found"},
		{name: "repository name with ..", method: "GET", path: "/a..b.git/info/refs?service=git-upload-pack", token: readToken, wantCode: 400},
		{name: "dumb protocol", method: "GET", path: "/demo.git/info/refs", token: readToken, wantCode: 404, wantBody: "smart HTTP"},
		{name: "repository file", method: "GET", path: "/demo.git/HEAD", token: readToken, wantCode: 404, wantBody: "not a git smart HTTP path"},
		{name: "GET of a pack endpoint", method: "GET", path: "/demo.git/git-upload-pack", token: readToken, wantCode: 405},
		{name: "body over the limit", method: "POST", path: "/demo.git/git-upload-pack", token: readToken,
			body: bytes.NewReader(make([]byte, testMaxBody+1)), length: testMaxBody + 1, wantCode: 413, wantBody: "max-request-bytes limit"},
		{name: "chunked body over the limit", method: "POST", path: "/demo.git/git-receive-pack", token: writeToken,
			body: io.LimitReader(zeros{}, testMaxBody+1), length: -1, wantCode: 413, wantBody: "max-request-bytes limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != nil {
				req.ContentLength = tt.length
				req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
			}
			if tt.token != "" {
				req.Header.Set("Authorization", basic(tt.token))
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("%s %s = %d %q, want %d with %q", tt.method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
	checkLogs(t, ts.logs.String())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// checkLogs asserts every line is JSON and that no token nor Authorization header was logged.
func checkLogs(t *testing.T, logs string) {
	t.Helper()
	for _, secret := range []string{readToken, writeToken, basic(readToken), basic(writeToken), "Authorization", "authorization"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line %q is not JSON: %v", line, err)
		}
		if rec["msg"] == "request" {
			lines++
		}
	}
	if lines == 0 {
		t.Errorf("no request was logged:\n%s", logs)
	}
}

func branchesOf(t *testing.T, ts *testServer, repo string) map[string]string {
	t.Helper()
	var b Branches
	if err := json.Unmarshal(inspect(t, ts, "/-/branches/"+repo), &b); err != nil {
		t.Fatal(err)
	}
	return b.Branches
}

func inspect(t *testing.T, ts *testServer, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", basic(readToken))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %q, %v", path, resp.StatusCode, body, err)
	}
	return body
}

// gitClient runs the real git binary, isolated from the machine's and user's config, with the
// token given by a credential helper (never in the URL).
type gitClient struct {
	t    *testing.T
	home string
}

func newGitClient(t *testing.T) *gitClient {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests run the real git client: %v", err)
	}
	return &gitClient{t: t, home: t.TempDir()}
}

// run runs git in dir with token (empty: no credentials) and returns its combined output.
func (g *gitClient) run(dir, token string, args ...string) (string, error) {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + g.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		"GITSERVER_TEST_TOKEN=" + token}
	if token != "" {
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper",
			`GIT_CONFIG_VALUE_0=!f() { test "$1" = get && printf 'username=e2e\npassword=%s\n' "$GITSERVER_TEST_TOKEN"; }; f`)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (g *gitClient) must(dir, token string, args ...string) string {
	g.t.Helper()
	out, err := g.run(dir, token, args...)
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestGitClient(t *testing.T) {
	ts := newTestServer(t)
	g := newGitClient(t)
	work := t.TempDir()
	url := ts.URL + "/demo.git"

	t.Run("clone with the read token", func(t *testing.T) {
		g.must(work, readToken, "clone", "--quiet", url, "read")
		got, err := os.ReadFile(filepath.Join(work, "read", "greeting.txt"))
		want, _ := DemoFile("greeting.txt")
		if err != nil || string(got) != string(want) || !strings.Contains(string(got), "Hello from the demo repository.") {
			t.Fatalf("greeting.txt = %q, %v; want %q", got, err, want)
		}
		if branch := strings.TrimSpace(g.must(filepath.Join(work, "read"), "", "branch", "--show-current")); branch != DemoBranch {
			t.Errorf("cloned branch %q, want %s", branch, DemoBranch)
		}
	})
	failures := []struct {
		name, token, url, want string
	}{
		{"clone with a wrong token", "wrong-token", url, "Authentication failed"},
		{"clone of an unknown repository", readToken, ts.URL + "/nope.git", "not found"},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			out, err := g.run(work, tt.token, "clone", tt.url, filepath.Join(t.TempDir(), "c"))
			if err == nil || !strings.Contains(out, tt.want) {
				t.Fatalf("git clone = %v, output %q; want a failure with %q", err, out, tt.want)
			}
		})
	}
	t.Run("push a branch with the read token", func(t *testing.T) {
		dir := filepath.Join(work, "read")
		g.must(dir, "", "checkout", "--quiet", "-b", "from-reader")
		g.must(dir, "", "commit", "--quiet", "--allow-empty", "-m", "reader")
		out, err := g.run(dir, readToken, "push", "origin", "from-reader")
		if err == nil || !strings.Contains(out, "403") {
			t.Fatalf("git push with the read token = %v, output %q; want a failure with 403", err, out)
		}
		if _, ok := branchesOf(t, ts, "demo")["from-reader"]; ok {
			t.Error("the read token's push created a branch")
		}
	})
	t.Run("push a branch with the write token", func(t *testing.T) {
		dir := filepath.Join(work, "write")
		g.must(work, writeToken, "clone", "--quiet", url, "write")
		g.must(dir, "", "checkout", "--quiet", "-b", "feature/greeting")
		changed := "Hello from a pushed branch.\n"
		if err := os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		// Over http.postBuffer, so git sends the pack chunked (spooled by the server).
		big := make([]byte, 64<<10)
		_, _ = rand.Read(big)
		if err := os.WriteFile(filepath.Join(dir, "random.bin"), big, 0o644); err != nil {
			t.Fatal(err)
		}
		g.must(dir, "", "add", "greeting.txt", "random.bin")
		g.must(dir, "", "commit", "--quiet", "-m", "change the greeting")
		sha := strings.TrimSpace(g.must(dir, "", "rev-parse", "HEAD"))
		g.must(dir, writeToken, "-c", "http.postBuffer=4096", "push", "--quiet", "origin", "feature/greeting")
		branches := branchesOf(t, ts, "demo")
		if branches["feature/greeting"] != sha || branches[DemoBranch] == "" {
			t.Errorf("branches = %v, want feature/greeting at %s and %s", branches, sha, DemoBranch)
		}
		if got := inspect(t, ts, "/-/show/demo?ref=feature/greeting&path=greeting.txt"); string(got) != changed {
			t.Errorf("show greeting.txt on feature/greeting = %q, want %q", got, changed)
		}
		if got := inspect(t, ts, "/-/show/demo?ref=feature/greeting&path=random.bin"); !bytes.Equal(got, big) {
			t.Errorf("show random.bin: %d bytes differ from the %d pushed", len(got), len(big))
		}
		if got := inspect(t, ts, "/-/show/demo?ref=main&path=greeting.txt"); string(got) == changed {
			t.Error("main changed")
		}
	})
	checkLogs(t, ts.logs.String())
	if !strings.Contains(ts.logs.String(), `"push":true`) {
		t.Errorf("no push was logged:\n%s", ts.logs.String())
	}
}
