package store

import (
	"math"
	"sync"
)

// answerMemo keeps a query's last answers while no data arrived (Store.arrivals): the page, /metrics and a
// second client asking the same window share one computation, and a finished run answers a repeat at once.
// Hours loaded or dropped by the memory budget meanwhile change nothing: an answer is a function of the data,
// and any record that arrives invalidates it (docs/dashboard-api.md, `GET /api/v1/goodput`).
type answerMemo[K comparable, V any] struct {
	mu sync.Mutex
	// arrivals is the store's arrivals count the answers were computed at.
	arrivals uint64
	answers  map[K]V
}

// answerMemoSize bounds the windows kept per query: a page asks a few at a time.
const answerMemoSize = 8

// get is the answer kept for key while arrivals is as it was.
func (m *answerMemo[K, V]) get(arrivals uint64, key K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.answers[key]
	if !ok || m.arrivals != arrivals {
		var zero V
		return zero, false
	}
	return a, true
}

// put keeps answer a for key, computed from the data as of arrivals from; after is the count read once it was
// computed: an answer data arrived under is not kept.
func (m *answerMemo[K, V]) put(from, after uint64, key K, a V) {
	if from != after {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil || m.arrivals != after || len(m.answers) >= answerMemoSize {
		m.answers, m.arrivals = map[K]V{}, after
	}
	m.answers[key] = a
}

// remembered is m's answer for key while no data arrived, else compute's, kept.
func remembered[K comparable, V any](s *Store, m *answerMemo[K, V], key K, compute func() V) V {
	from := s.answerVersion()
	if a, ok := m.get(from, key); ok {
		return a
	}
	a := compute()
	m.put(from, s.answerVersion(), key, a)
	return a
}

// answerMemos are the memos of the answers that join several streams over a window.
type answerMemos struct {
	goodput    answerMemo[[2]float64, *GoodputResult]
	weightSync answerMemo[[2]float64, *WeightSyncResult]
	pool       answerMemo[poolKey, *PoolResult]
}

type poolKey struct {
	t0, t1 float64
	points int
}

// answerVersion is the store's arrivals count.
func (s *Store) answerVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.arrivals
}

// keyOf is a window as a memo key (NaN bounds read as one key).
func keyOf(t0, t1 float64) [2]float64 {
	if math.IsNaN(t0) || math.IsNaN(t1) {
		return [2]float64{}
	}
	return [2]float64{t0, t1}
}
