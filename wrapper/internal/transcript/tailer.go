// Package transcript follows the agent CLI's session transcript (JSONL) while the agent runs and
// turns it into one structured log line and one counter increment per event.
//
// The transcript is written by another process that never promised a format: lines arrive in
// several chunks, may be many MiB long, may be damaged (truncated, glued, NUL runs), and the file
// appears late and may shrink. The Tailer therefore acts only on bytes up to a '\n', keeps its
// offset at the start of an unfinished line, never holds more than a bounded amount of one line,
// and never fails on content. Facts about the format: docs/agent-cli.md, "Transcript records the
// wrapper knows".
package transcript

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/pkg/redact"
)

// StreamCounter counts transcript events by type (one label).
type StreamCounter interface {
	WithLabelValues(lvs ...string) prometheus.Counter
}

// InternalIssueCounter counts report_internal_issue calls by category and severity (two labels).
type InternalIssueCounter interface {
	WithLabelValues(lvs ...string) prometheus.Counter
}

// Defaults, each overridable by an Option.
const (
	DefaultPollInterval = 200 * time.Millisecond
	// DefaultMaxLineBytes is the longest line decoded in full. A longer line is still counted and
	// logged, from its first headBytes bytes, so memory stays bounded whatever the agent writes.
	DefaultMaxLineBytes = 8 << 20
)

const (
	readBufBytes = 256 << 10
	headBytes    = 64 << 10
	// keepLineBufBytes: line buffers up to this size are reused between lines; larger ones are
	// dropped after use so one huge line does not pin its buffer for the rest of the run.
	keepLineBufBytes = 4 << 20
)

// Tailer follows <root>/projects/*/<session>.jsonl and the subagent transcripts beside it.
// Run drives it; the other methods are safe to call from any goroutine.
type Tailer struct {
	root      string
	sessionID string

	log           *slog.Logger
	red           *redact.Redactor
	streamCounter StreamCounter
	issueCounter  InternalIssueCounter
	interval      time.Duration
	maxLine       int64
	maxKeys       int

	// Owned by the goroutine running Run (or by the caller of the unexported helpers in tests).
	mainDir  string
	files    map[string]*fileTail
	order    []*fileTail
	readBuf  []byte
	lineBuf  []byte
	headBuf  []byte
	seenUUID keySet
	seenTool keySet
	counters map[string]prometheus.Counter

	mu      sync.Mutex
	sum     Summary            // token totals included, so a forgotten message keeps its tokens
	usage   *boundedMap[usage] // the last usage seen per assistant message id
	heart   atomic.Int64
	running atomic.Bool
}

// Option configures a Tailer.
type Option func(*Tailer)

// WithLogger sets the logger events go to (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(t *Tailer) {
		if l != nil {
			t.log = l
		}
	}
}

// WithRedactor sets the redactor applied to every transcript-derived value before it is logged.
func WithRedactor(r *redact.Redactor) Option {
	return func(t *Tailer) {
		if r != nil {
			t.red = r
		}
	}
}

// WithCounter counts events by type on c; nil (or a nil *prometheus.CounterVec) disables counting.
func WithCounter(c StreamCounter) Option {
	return func(t *Tailer) {
		if !isNil(c) {
			t.streamCounter = c
		}
	}
}

// WithInternalIssueCounter counts report_internal_issue calls on c; nil disables counting.
func WithInternalIssueCounter(c InternalIssueCounter) Option {
	return func(t *Tailer) {
		if !isNil(c) {
			t.issueCounter = c
		}
	}
}

// WithPollInterval sets how often the files are checked for new bytes (values <= 0 are ignored).
func WithPollInterval(d time.Duration) Option {
	return func(t *Tailer) {
		if d > 0 {
			t.interval = d
		}
	}
}

// WithMaxLineBytes sets the longest line decoded in full (values <= 0 are ignored).
func WithMaxLineBytes(n int64) Option {
	return func(t *Tailer) {
		if n > 0 {
			t.maxLine = n
		}
	}
}

// WithMaxDedupeKeys sets how many keys each dedupe table remembers (values <= 0 are ignored;
// default MaxDedupeKeys).
func WithMaxDedupeKeys(n int) Option {
	return func(t *Tailer) {
		if n > 0 {
			t.maxKeys = n
		}
	}
}

// isNil reports a nil interface or an interface holding a nil *prometheus.CounterVec, the one
// typed nil a caller can realistically pass (an unset Metrics field).
func isNil(c interface {
	WithLabelValues(...string) prometheus.Counter
}) bool {
	if c == nil {
		return true
	}
	v, ok := c.(*prometheus.CounterVec)
	return ok && v == nil
}

// New returns a Tailer for the session's transcripts under root (the agent's config dir).
func New(root, sessionID string, opts ...Option) *Tailer {
	t := &Tailer{
		root:      root,
		sessionID: sessionID,
		log:       slog.New(slog.DiscardHandler),
		red:       redact.New(),
		interval:  DefaultPollInterval,
		maxLine:   DefaultMaxLineBytes,
		maxKeys:   MaxDedupeKeys,
		files:     map[string]*fileTail{},
		counters:  map[string]prometheus.Counter{},
	}
	for _, o := range opts {
		o(t)
	}
	t.seenUUID, t.seenTool = newKeySet(t.maxKeys), newKeySet(t.maxKeys)
	t.usage = newBoundedMap[usage](t.maxKeys)
	// Every line the tailer logs names its session, once.
	t.log = t.log.With(slog.String("session_id", sessionID))
	t.beat()
	return t
}

// Run follows the transcripts until ctx is done (the agent exited), then drains what was
// written up to then and returns. It returns no error for anything found in the files.
func (t *Tailer) Run(ctx context.Context) {
	t.running.Store(true)
	defer t.running.Store(false)
	ticker := time.NewTicker(t.interval)
	defer ticker.Stop()
	for {
		t.pollOnce()
		select {
		case <-ctx.Done():
			t.Drain()
			return
		case <-ticker.C:
		}
	}
}

// Drain reads every byte written so far (looking for late files once more), then warns about
// any unterminated last line, which is left unprocessed: only bytes up to a '\n' are acted on.
// Run calls it when its context ends; call it directly only when Run is not used.
func (t *Tailer) Drain() {
	// A few rounds: a subagent file can appear while the main file is being read.
	for range 5 {
		if t.pollOnce() == 0 {
			break
		}
	}
	for _, f := range t.order {
		if rest := f.scan - f.off; rest > 0 {
			t.log.Warn("transcript ends with an unterminated line; left unprocessed",
				slog.String("path", f.path), slog.Int64("bytes", rest))
		}
		f.close()
	}
	if len(t.order) == 0 {
		t.log.Warn("no transcript found for the session", slog.String("root", t.root))
	}
}

// Heartbeat is the last time the tailer made progress through its loop; a stale heartbeat while
// Running means the tailer is stuck.
func (t *Tailer) Heartbeat() time.Time { return time.Unix(0, t.heart.Load()) }

// Running reports whether Run is active.
func (t *Tailer) Running() bool { return t.running.Load() }

func (t *Tailer) beat() { t.heart.Store(time.Now().UnixNano()) }

// pollOnce discovers files and reads each to its current end; it returns the bytes read.
func (t *Tailer) pollOnce() int64 {
	t.beat()
	if t.readBuf == nil {
		t.readBuf = make([]byte, readBufBytes)
		t.headBuf = make([]byte, headBytes)
	}
	t.discover()
	var n int64
	for _, f := range t.order {
		n += f.poll(t)
	}
	t.beat()
	return n
}

// discover finds the main transcript by glob (the directory name is the agent's cwd slug, a
// rule that changed across versions, so it is never computed here) and then the subagent files
// in <slug>/<session>/subagents/.
func (t *Tailer) discover() {
	if t.mainDir == "" {
		matches, _ := filepath.Glob(filepath.Join(t.root, "projects", "*", t.sessionID+".jsonl"))
		sort.Strings(matches)
		for _, m := range matches {
			t.addFile(m, source{kind: "main"})
			if t.mainDir == "" {
				t.mainDir = filepath.Dir(m)
			}
		}
		if t.mainDir == "" {
			return
		}
	}
	subs, _ := filepath.Glob(filepath.Join(t.mainDir, t.sessionID, "subagents", "agent-*.jsonl"))
	sort.Strings(subs)
	for _, s := range subs {
		id := filepath.Base(s)
		id = id[len("agent-") : len(id)-len(".jsonl")]
		t.addFile(s, source{kind: "subagent", agentID: id})
	}
}

func (t *Tailer) addFile(path string, src source) {
	if _, ok := t.files[path]; ok {
		return
	}
	src.path = path
	f := &fileTail{path: path, src: src}
	t.files[path] = f
	t.order = append(t.order, f)
	t.mu.Lock()
	t.sum.Files++
	t.mu.Unlock()
	t.log.Info("transcript found", slog.String("path", path), slog.String("source", src.kind),
		slog.String("agent_id", src.agentID))
}

// source says which file a line came from.
type source struct {
	kind    string // main or subagent
	agentID string
	path    string
}
