package store

import (
	"math"
	"sync"
)

// answerMemo keeps a query's last answers while the run's data is unchanged (answerVersion): the page, /metrics
// and a second client asking the same window share one computation, and a finished run answers a repeat at
// once. Any record that arrives moves the version, so an answer is never older than the data
// (docs/dashboard-api.md, `GET /api/v1/goodput`).
type answerMemo[K comparable, V any] struct {
	mu sync.Mutex
	// version is the data version the answers were computed at.
	version [7]uint64
	answers map[K]V
}

// answerMemoSize bounds the windows kept per query: a page asks a few at a time.
const answerMemoSize = 8

// get is the answer kept for key at data version v.
func (m *answerMemo[K, V]) get(v [7]uint64, key K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.answers[key]
	if !ok || m.version != v {
		var zero V
		return zero, false
	}
	return a, true
}

// put keeps answer a for key under v, the version read after it was computed; from is the one read before. An
// answer the data changed under (a record arrived: DataVersion moved) is not kept; one whose computation only
// loaded hours (the phases' generation moved) is kept under the version after it.
func (m *answerMemo[K, V]) put(from, v [7]uint64, key K, a V) {
	if [6]uint64(from[:6]) != [6]uint64(v[:6]) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil || m.version != v || len(m.answers) >= answerMemoSize {
		m.answers, m.version = map[K]V{}, v
	}
	m.answers[key] = a
}

// answerMemos are the memos of the answers that join several streams over a window.
type answerMemos struct {
	goodput answerMemo[[2]float64, *GoodputResult]
	pool    answerMemo[poolKey, *PoolResult]
}

type poolKey struct {
	t0, t1 float64
	points int
}

// answerVersion is the run's data version (DataVersion) with the phases' load generation: what every answer
// that joins trajectories, phases, engines and metrics is a function of.
func (s *Store) answerVersion() [7]uint64 {
	v := s.DataVersion()
	s.mu.RLock()
	gen := s.phases.gen
	s.mu.RUnlock()
	return [7]uint64{v[0], v[1], v[2], v[3], v[4], v[5], uint64(gen)} //nolint:gosec // a counter, never negative
}

// keyOf is a window as a memo key (NaN bounds read as one key).
func keyOf(t0, t1 float64) [2]float64 {
	if math.IsNaN(t0) || math.IsNaN(t1) {
		return [2]float64{}
	}
	return [2]float64{t0, t1}
}
