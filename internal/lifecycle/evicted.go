package lifecycle

// Evicted remembers the ids of the last n attempts dropped before their consume arrived (a bounded FIFO set), so
// that a consume naming one reads unknown with reason "evicted" rather than "never seen" (docs/semconv.md §3.1).
// The processor keys it by pcommon.TraceID, the dashboard's reader by its own trace id; both are 16 bytes.
type Evicted[K comparable] struct {
	ids  map[K]struct{}
	ring []K
	next int
}

// NewEvicted returns a set holding at most n ids (n ≥ 1).
func NewEvicted[K comparable](n int) Evicted[K] {
	return Evicted[K]{ids: make(map[K]struct{}, n), ring: make([]K, 0, max(1, n))}
}

// Add remembers id, forgetting the oldest beyond the bound. An id already held keeps its place.
func (e *Evicted[K]) Add(id K) {
	if _, ok := e.ids[id]; ok {
		return
	}
	if len(e.ring) < cap(e.ring) {
		e.ring = append(e.ring, id)
	} else {
		delete(e.ids, e.ring[e.next])
		e.ring[e.next] = id
		e.next = (e.next + 1) % len(e.ring)
	}
	e.ids[id] = struct{}{}
}

// Has says whether id is held.
func (e *Evicted[K]) Has(id K) bool {
	_, ok := e.ids[id]
	return ok
}

// Len is the number of ids held.
func (e *Evicted[K]) Len() int { return len(e.ring) }
