// Package gitserver is the e2e suite's git server: git's smart HTTP protocol over a directory of
// bare repositories (git http-backend run through net/http/cgi), guarded by two tokens, with a
// demo repository seeded at start and read-only inspection endpoints for the suite.
//
// Every route but /healthz needs a token as the password of HTTP Basic auth (the user name is
// ignored). The read token clones and fetches; the write token also pushes. The inspection routes
// (/-/) also take the token in the TokenHeader header: the API server's service proxy, through
// which the suite reads them, drops the Authorization header of the requests it authenticates.
//
//	GET  /healthz                                         "ok", no token
//	GET  /<repo>.git/info/refs?service=git-upload-pack    clone, fetch: read or write token
//	POST /<repo>.git/git-upload-pack
//	GET  /<repo>.git/info/refs?service=git-receive-pack   push: write token
//	POST /<repo>.git/git-receive-pack
//	GET  /-/branches/<repo>                               {"branches":{"main":"<sha>",...}}
//	GET  /-/show/<repo>?ref=<branch>&path=<file>          the file's bytes at the branch
//
// A missing or wrong token is answered 401 with WWW-Authenticate (git reports "Authentication
// failed"), a push with the read token 403, an unknown repository 404 (git reports "repository
// ... not found").
package gitserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Realm is the HTTP Basic realm of the 401 answers.
const Realm = "tatara-e2e-git"

// TokenHeader carries a token to the inspection routes when the Authorization header cannot.
const TokenHeader = "X-Tatara-Git-Token"

// Defaults of the limits; cmd/git-server has a flag for each, and a request over one is refused
// with an error that names it.
const (
	// DefaultMaxRequestBytes bounds one request body (a push's pack, a fetch's negotiation).
	DefaultMaxRequestBytes   int64 = 64 << 20
	DefaultReadHeaderTimeout       = 10 * time.Second
	DefaultIdleTimeout             = 2 * time.Minute
	// GitTimeout bounds one git command of the inspection endpoints and of the demo seeding.
	GitTimeout = 30 * time.Second
	// MaxNameBytes bounds a repository name, a branch name and a file path.
	MaxNameBytes = 256
)

// Branches is the answer of GET /-/branches/<repo>: branch name to commit.
type Branches struct {
	Branches map[string]string `json:"branches"`
}

// Config configures a Server.
type Config struct {
	// Root holds the bare repositories, <Root>/<name>.git; it is created if missing.
	Root string
	// ReadToken clones and fetches; WriteToken also pushes. Both are required and differ.
	ReadToken, WriteToken string
	// MaxRequestBytes bounds one request body; 0 is DefaultMaxRequestBytes.
	MaxRequestBytes int64
	Log             *slog.Logger
}

// Server serves the repositories under its root.
type Server struct {
	root          string
	read, write   [sha256.Size]byte
	maxBody       int64
	log           *slog.Logger
	backend       string
	home          string
	env           []string
	cgiLog        *log.Logger
	backendStderr io.Writer
}

// New checks the configuration, finds git http-backend (git --exec-path) and prepares the
// environment of the git processes: a HOME of their own under the temporary directory (the
// process's may be unwritable), no system config, receive-pack enabled. Close removes that HOME.
func New(cfg Config) (*Server, error) {
	if cfg.Root == "" {
		return nil, errors.New("no repository root")
	}
	if cfg.ReadToken == "" || cfg.WriteToken == "" {
		return nil, errors.New("both a read token and a write token are required")
	}
	if cfg.ReadToken == cfg.WriteToken {
		return nil, errors.New("the read token and the write token are the same; the read token must not be able to push")
	}
	if cfg.MaxRequestBytes < 0 {
		return nil, fmt.Errorf("max-request-bytes limit %d is negative", cfg.MaxRequestBytes)
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("git is not on PATH: %w", err)
	}
	home, err := os.MkdirTemp("", "git-server-home-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a HOME for git: %w", err)
	}
	s := &Server{root: root, read: sha256.Sum256([]byte(cfg.ReadToken)), write: sha256.Sum256([]byte(cfg.WriteToken)),
		maxBody: cfg.MaxRequestBytes, log: cfg.Log, home: home}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	s.env = []string{"PATH=" + path, "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		// upload-pack's negotiation is buffered by http-backend; the same bound as the body.
		"GIT_CONFIG_KEY_1=http.maxRequestBuffer", "GIT_CONFIG_VALUE_1=" + strconv.FormatInt(s.maxBody, 10)}
	ctx, cancel := context.WithTimeout(context.Background(), GitTimeout)
	defer cancel()
	out, err := s.git(ctx, nil, nil, "--exec-path")
	if err != nil {
		_ = os.RemoveAll(home)
		return nil, err
	}
	s.backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(s.backend); err != nil {
		_ = os.RemoveAll(home)
		return nil, fmt.Errorf("git http-backend is not in git --exec-path: %w", err)
	}
	s.cgiLog = slog.NewLogLogger(cfg.Log.Handler(), slog.LevelError)
	s.backendStderr = &logWriter{log: cfg.Log, msg: "git http-backend stderr"}
	return s, nil
}

// Close removes the HOME of the git processes.
func (s *Server) Close() error { return os.RemoveAll(s.home) }

// Root is the absolute repository root.
func (s *Server) Root() string { return s.root }

// ReadTokenFile reads a token file: one trailing newline (LF or CRLF) is trimmed and the token
// must not be empty.
func ReadTokenFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("token file %s holds more than one line", path)
	}
	return tok, nil
}

// ValidName checks a repository name, branch or file path (what says which in errors): 1 to
// MaxNameBytes of [A-Za-z0-9._/-], no "..", no empty or "." element, nothing that starts with
// "-" (no element of it can be read as an option).
func ValidName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > MaxNameBytes:
		return fmt.Errorf("%s is over the %d-byte name limit", what, MaxNameBytes)
	case strings.Contains(s, ".."):
		return fmt.Errorf("%s %q contains \"..\"", what, s)
	}
	for _, c := range s {
		if !nameChar(c) {
			return fmt.Errorf("%s %q has a character outside [A-Za-z0-9._/-]", what, s)
		}
	}
	for _, el := range strings.Split(s, "/") {
		switch {
		case el == "" || el == ".":
			return fmt.Errorf("%s %q has an empty or \".\" path element", what, s)
		case strings.HasPrefix(el, "-"):
			return fmt.Errorf("%s %q has an element that starts with \"-\"", what, s)
		}
	}
	return nil
}

func nameChar(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.ContainsRune("._/-", c)
}

func (s *Server) repoDir(name string) string {
	return filepath.Join(s.root, filepath.FromSlash(name)+".git")
}

func (s *Server) repoExists(name string) bool {
	fi, err := os.Stat(filepath.Join(s.repoDir(name), "HEAD"))
	return err == nil && fi.Mode().IsRegular()
}

// gitError is a git command that failed; code is its exit code (-1: it did not run to the end).
type gitError struct {
	args   []string
	code   int
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: exit code %d: %s", strings.Join(e.args, " "), e.code, e.stderr)
}

// git runs git with the server's environment (and extra) and returns its stdout.
func (s *Server) git(ctx context.Context, stdin io.Reader, extra []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(append([]string(nil), s.env...), extra...)
	cmd.Dir = s.home
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		ge := &gitError{args: args, code: -1, stderr: strings.TrimSpace(stderr.String())}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ge.code = ee.ExitCode()
		}
		if ge.stderr == "" {
			ge.stderr = err.Error()
		}
		return nil, ge
	}
	return stdout.Bytes(), nil
}

// Handler serves git's smart HTTP protocol, the inspection routes and /healthz, and logs every
// request (never a token nor the Authorization header).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /-/branches/{repo...}", s.authorized(s.branches))
	mux.HandleFunc("GET /-/show/{repo...}", s.authorized(s.show))
	mux.HandleFunc("/-/", s.authorized(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, r.Method+" "+r.URL.Path+" is not served (GET /-/branches/<repo>, GET /-/show/<repo>?ref=&path=)", http.StatusNotFound)
	}))
	mux.HandleFunc("/", s.gitHTTP)
	return s.logged(mux)
}

type access int

const (
	noAccess access = iota
	readAccess
	writeAccess
)

func (a access) String() string {
	return [...]string{"none", "read", "write"}[a]
}

// access compares the Basic password (or, with orHeader, the TokenHeader when there is no Basic
// password) with both tokens in constant time (their SHA-256 sums, so the length does not leak
// either).
func (s *Server) access(r *http.Request, orHeader bool) access {
	_, pw, ok := r.BasicAuth()
	if !ok && orHeader {
		pw = r.Header.Get(TokenHeader)
	}
	if pw == "" {
		return noAccess
	}
	sum := sha256.Sum256([]byte(pw))
	isWrite := subtle.ConstantTimeCompare(sum[:], s.write[:])
	isRead := subtle.ConstantTimeCompare(sum[:], s.read[:])
	switch {
	case isWrite == 1:
		return writeAccess
	case isRead == 1:
		return readAccess
	}
	return noAccess
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
	http.Error(w, "authentication required: send the read or write token as the HTTP Basic password", http.StatusUnauthorized)
}

// authorized lets requests with either token (Basic or TokenHeader) through.
func (s *Server) authorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.access(r, true)
		info := infoOf(r)
		info.access, info.repo = a, strings.TrimSuffix(r.PathValue("repo"), ".git")
		if a == noAccess {
			unauthorized(w)
			return
		}
		next(w, r)
	}
}

// gitPath splits a smart HTTP path into the repository name and the endpoint: "/info/refs"
// (with ?service=), "/git-upload-pack" or "/git-receive-pack". code is the status of an error.
func gitPath(r *http.Request) (repo, endpoint string, push bool, code int, err error) {
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/info/refs"):
		endpoint = "/info/refs"
		switch r.URL.Query().Get("service") {
		case "git-upload-pack":
		case "git-receive-pack":
			push = true
		default:
			return "", "", false, http.StatusNotFound, errors.New("only git's smart HTTP protocol is served: info/refs needs ?service=git-upload-pack or ?service=git-receive-pack")
		}
	case strings.HasSuffix(p, "/git-upload-pack"):
		endpoint = "/git-upload-pack"
	case strings.HasSuffix(p, "/git-receive-pack"):
		endpoint, push = "/git-receive-pack", true
	default:
		return "", "", false, http.StatusNotFound, fmt.Errorf("%s is not a git smart HTTP path (/<repo>.git/info/refs, /<repo>.git/git-upload-pack, /<repo>.git/git-receive-pack)", p)
	}
	repo = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(p, endpoint), "/"), ".git")
	if err := ValidName("repository name", repo); err != nil {
		return "", "", push, http.StatusBadRequest, err
	}
	return repo, endpoint, push, 0, nil
}

// gitHTTP runs git http-backend for a smart HTTP request: authentication (401), the path (404,
// 400), the permission (403), the method (405), the repository (404), the body limit (413).
func (s *Server) gitHTTP(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r)
	a := s.access(r, false)
	repo, endpoint, push, code, err := gitPath(r)
	info.access, info.repo, info.push = a, repo, push
	if a == noAccess {
		unauthorized(w)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	if push && a != writeAccess {
		http.Error(w, "the read token cannot push to "+repo+": push with the write token", http.StatusForbidden)
		return
	}
	want, methodOK := http.MethodPost, r.Method == http.MethodPost
	if endpoint == "/info/refs" {
		want, methodOK = http.MethodGet, r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	if !methodOK {
		w.Header().Set("Allow", want)
		http.Error(w, fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, want), http.StatusMethodNotAllowed)
		return
	}
	if !s.repoExists(repo) {
		http.Error(w, "repository "+repo+" not found", http.StatusNotFound)
		return
	}

	req := r.Clone(r.Context())
	req.URL.Path, req.URL.RawPath = "/"+repo+".git"+endpoint, ""
	// Headers become HTTP_* variables of the CGI process: not the credentials.
	for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie", TokenHeader} {
		req.Header.Del(h)
	}
	if r.Method == http.MethodPost {
		body, n, code, err := s.readBody(w, r)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		defer func() { _ = body.Close() }()
		req.Body, req.ContentLength, req.TransferEncoding = body, n, nil
	}
	user := "reader"
	if a == writeAccess {
		user = "writer"
	}
	h := &cgi.Handler{
		Path:   s.backend,
		Dir:    s.root,
		Env:    append(append([]string(nil), s.env...), "GIT_PROJECT_ROOT="+s.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER="+user),
		Logger: s.cgiLog,
		Stderr: s.backendStderr,
	}
	h.ServeHTTP(w, req)
}

// readBody bounds the request body by the max-request-bytes limit. A body of unknown length
// (chunked: git sends packs over http.postBuffer that way, and CGI cannot take it) is spooled to
// an unlinked temporary file first, so the CGI process gets a CONTENT_LENGTH.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (io.ReadCloser, int64, int, error) {
	tooLarge := fmt.Errorf("request body is over the max-request-bytes limit (%d bytes)", s.maxBody)
	if r.ContentLength > s.maxBody {
		return nil, 0, http.StatusRequestEntityTooLarge, tooLarge
	}
	if r.ContentLength >= 0 {
		return http.MaxBytesReader(w, r.Body, s.maxBody), r.ContentLength, 0, nil
	}
	f, err := os.CreateTemp("", "git-server-body-")
	if err != nil {
		return nil, 0, http.StatusInternalServerError, fmt.Errorf("failed to spool the request body: %w", err)
	}
	_ = os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(r.Body, s.maxBody+1))
	switch {
	case err != nil:
		_ = f.Close()
		return nil, 0, http.StatusBadRequest, fmt.Errorf("failed to read the request body: %w", err)
	case n > s.maxBody:
		_ = f.Close()
		return nil, 0, http.StatusRequestEntityTooLarge, tooLarge
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, 0, http.StatusInternalServerError, err
	}
	return f, n, 0, nil
}

// inspected validates the repository of an inspection route (400, 404).
func (s *Server) inspected(w http.ResponseWriter, r *http.Request) (string, bool) {
	repo := strings.TrimSuffix(r.PathValue("repo"), ".git")
	infoOf(r).repo = repo
	if err := ValidName("repository name", repo); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "", false
	}
	if !s.repoExists(repo) {
		http.Error(w, "repository "+repo+" not found", http.StatusNotFound)
		return "", false
	}
	return repo, true
}

// branches serves GET /-/branches/<repo>.
func (s *Server) branches(w http.ResponseWriter, r *http.Request) {
	repo, ok := s.inspected(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), GitTimeout)
	defer cancel()
	out, err := s.git(ctx, nil, nil, "--git-dir", s.repoDir(repo), "for-each-ref", "--format=%(objectname) %(refname)", "--end-of-options", "refs/heads/")
	if err != nil {
		s.log.Error("failed to list branches", slog.String("repo", repo), slog.Any("error", err))
		http.Error(w, "failed to list the branches of "+repo, http.StatusInternalServerError)
		return
	}
	res := Branches{Branches: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		sha, ref, ok := strings.Cut(line, " ")
		if ok {
			res.Branches[strings.TrimPrefix(ref, "refs/heads/")] = sha
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// show serves GET /-/show/<repo>?ref=<branch>&path=<file>: the blob's bytes.
func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	repo, ok := s.inspected(w, r)
	if !ok {
		return
	}
	ref, path := r.URL.Query().Get("ref"), r.URL.Query().Get("path")
	for _, v := range []struct{ what, value string }{{"ref", ref}, {"path", path}} {
		if err := ValidName(v.what, v.value); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), GitTimeout)
	defer cancel()
	gitDir := s.repoDir(repo)
	// Every object name starts with "refs/heads/": none can be read as an option.
	branch := "refs/heads/" + ref
	if _, err := s.git(ctx, nil, nil, "--git-dir", gitDir, "rev-parse", "--verify", "--quiet", "--end-of-options", branch+"^{commit}"); err != nil {
		http.Error(w, fmt.Sprintf("branch %s not found in repository %s", ref, repo), http.StatusNotFound)
		return
	}
	object := branch + ":" + path
	typ, err := s.git(ctx, nil, nil, "--git-dir", gitDir, "cat-file", "-t", "--end-of-options", object)
	if err != nil {
		http.Error(w, fmt.Sprintf("path %s not found on branch %s of repository %s", path, ref, repo), http.StatusNotFound)
		return
	}
	if t := strings.TrimSpace(string(typ)); t != "blob" {
		http.Error(w, fmt.Sprintf("path %s on branch %s of repository %s is a %s, not a file", path, ref, repo, t), http.StatusNotFound)
		return
	}
	out, err := s.git(ctx, nil, nil, "--git-dir", gitDir, "cat-file", "blob", "--end-of-options", object)
	if err != nil {
		s.log.Error("failed to read a file", slog.String("repo", repo), slog.String("ref", ref), slog.String("path", path), slog.Any("error", err))
		http.Error(w, "failed to read "+path, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// reqInfo is what the handlers learn about a request, for its log line.
type reqInfo struct {
	repo   string
	push   bool
	access access
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// logged logs one line a request: method, path (never the query, nor any header), status, repo,
// push, the token's access. Probes (/healthz) are logged at debug level.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.status()),
			slog.Int64("bytes", sw.bytes), slog.String("repo", info.repo), slog.Bool("push", info.push),
			slog.String("access", info.access.String()), slog.Int64("duration_ms", time.Since(start).Milliseconds()),
			slog.String("remote", r.RemoteAddr)}
		if svc := r.URL.Query().Get("service"); svc == "git-upload-pack" || svc == "git-receive-pack" {
			attrs = append(attrs, slog.String("service", svc))
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// logWriter logs what a child process writes to stderr, one record a line.
type logWriter struct {
	log *slog.Logger
	msg string
}

func (l *logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line != "" {
			l.log.Warn(l.msg, slog.String("line", line))
		}
	}
	return len(b), nil
}
