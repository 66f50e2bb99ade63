package mcpserver

import (
	"container/list"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Session bounds: an agent uses one MCP session (a few across reconnects), but anything in its
// pod can send initialize in a loop, and every session costs the cli memory until it ends.
const (
	// DefaultMaxSessions is the most live sessions kept; a new one beyond it ends the session
	// used least recently (its client gets 404 and initializes again, as MCP prescribes).
	DefaultMaxSessions = 64
	// maxEndedSessions is the most ended session ids remembered (answered "has ended"); older
	// ones are forgotten and answered "unknown", with the same 404.
	maxEndedSessions = 1024
)

const sessionIDPrefix = "mcp-session-"

// boundedSessions is mcp-go's server.SessionIdManager with a bound: at most max live sessions,
// least recently used first out, and the ids of the ended ones it evicted handed to the caller
// (TakeEvicted) so their per-session state in mcp-go is dropped too.
type boundedSessions struct {
	max int

	mu      sync.Mutex
	live    map[string]*list.Element // value: the id; front = most recently used
	order   *list.List
	ended   map[string]struct{}
	endedQ  []string // FIFO of ended ids, for the bound
	evicted []string // ended by the bound, not yet cleaned up in mcp-go
}

func newBoundedSessions(max int) *boundedSessions {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &boundedSessions{max: max, live: map[string]*list.Element{}, order: list.New(), ended: map[string]struct{}{}}
}

// Generate opens a session, ending the least recently used one when max are live.
func (b *boundedSessions) Generate() string {
	id := sessionIDPrefix + uuid.NewString()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live[id] = b.order.PushFront(id)
	for len(b.live) > b.max {
		oldest := b.order.Back()
		victim := oldest.Value.(string)
		b.end(victim)
		b.evicted = append(b.evicted, victim)
	}
	return id
}

// Validate says whether id is a live session (and marks it used), an ended one, or unknown.
func (b *boundedSessions) Validate(id string) (isTerminated bool, err error) {
	if rest, ok := strings.CutPrefix(id, sessionIDPrefix); !ok || uuid.Validate(rest) != nil {
		return false, fmt.Errorf("invalid session id: %q", id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.live[id]; ok {
		b.order.MoveToFront(e)
		return false, nil
	}
	if _, ok := b.ended[id]; ok {
		return true, nil
	}
	return false, fmt.Errorf("session not found: %q", id)
}

// Terminate ends a session at its client's request (DELETE).
func (b *boundedSessions) Terminate(id string) (isNotAllowed bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.live[id]; ok {
		b.end(id)
	}
	return false, nil
}

// TakeEvicted returns the sessions the bound ended since the last call.
func (b *boundedSessions) TakeEvicted() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := b.evicted
	b.evicted = nil
	return ids
}

// Len is the number of live sessions.
func (b *boundedSessions) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}

// end moves a live id to the ended ones, forgetting the oldest ended id past maxEndedSessions.
func (b *boundedSessions) end(id string) {
	b.order.Remove(b.live[id])
	delete(b.live, id)
	b.ended[id] = struct{}{}
	b.endedQ = append(b.endedQ, id)
	if len(b.endedQ) > maxEndedSessions {
		delete(b.ended, b.endedQ[0])
		b.endedQ = b.endedQ[1:]
	}
}
