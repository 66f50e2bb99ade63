package transcript

import "crypto/sha256"

// MaxDedupeKeys is how many keys each of the tailer's dedupe tables remembers (line uuids,
// tool_use ids, assistant message ids); past it the oldest key is forgotten first. Keys are the
// agent's to choose, so each is remembered as a fixed-size hash, never whole: a full table costs
// about 4 MiB (9 MiB for the token usage per message id) however long its keys are. A line
// repeated after MaxDedupeKeys newer ones (a resume of a very long session) is counted again.
const MaxDedupeKeys = 100_000

// keyHash is a key's identity in a dedupe table: the first 128 bits of its SHA-256. Two keys
// collide only by a deliberate search of about 2^64 hashes, and a collision costs no more than one
// event left uncounted.
type keyHash [16]byte

func hashKey(s string) keyHash {
	sum := sha256.Sum256([]byte(s))
	return keyHash(sum[:16])
}

// boundedMap maps key hashes to values and holds at most max of them; adding one more forgets
// the oldest (first added). The zero value is not usable: see newBoundedMap.
type boundedMap[V any] struct {
	max  int
	m    map[keyHash]V
	ring []keyHash // insertion order; once full, ring[next] is the oldest
	next int
}

func newBoundedMap[V any](max int) *boundedMap[V] {
	return &boundedMap[V]{max: max, m: map[keyHash]V{}}
}

func (b *boundedMap[V]) get(h keyHash) (V, bool) {
	v, ok := b.m[h]
	return v, ok
}

// put sets h to v. A new key is appended to the order, forgetting the oldest key when the map is
// full; an existing key keeps its place.
func (b *boundedMap[V]) put(h keyHash, v V) {
	if _, ok := b.m[h]; ok {
		b.m[h] = v
		return
	}
	if len(b.ring) < b.max {
		b.ring = append(b.ring, h)
	} else {
		delete(b.m, b.ring[b.next])
		b.ring[b.next] = h
		b.next = (b.next + 1) % b.max
	}
	b.m[h] = v
}

func (b *boundedMap[V]) len() int { return len(b.m) }

// keySet remembers keys it was asked about, up to its bound.
type keySet struct{ m *boundedMap[struct{}] }

func newKeySet(max int) keySet { return keySet{m: newBoundedMap[struct{}](max)} }

// firstTime reports whether key is not remembered, and remembers it.
func (s keySet) firstTime(key string) bool {
	h := hashKey(key)
	if _, ok := s.m.get(h); ok {
		return false
	}
	s.m.put(h, struct{}{})
	return true
}
