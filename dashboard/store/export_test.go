package store

import "testing"

// Hooks for the external tests (engines_pack_advisory_test.go): the packed-hours run and the packing switch.
func PackRunForTest(t *testing.T) string { return packRun(t) }

func OpenPackedForTest(dir string, pack bool) (*Store, error) {
	if pack {
		return open(dir, false)
	}
	return open(dir, false, withEngPackOff())
}

func PackedSeriesForTest(st *Store) (packed, raw int) {
	return packedSeries(st)
}

// V1RunForTest writes the miles v1 run of v1run_test.go.
func V1RunForTest(t *testing.T, catalog bool) string { return v1Run(t, catalog) }

// SettleForTest runs the budget's settle with nothing in flight (every evictable block past the budget goes).
func SettleForTest(st *Store) {
	st.mu.Lock()
	st.settleLocked()
	st.mu.Unlock()
}

// EngineHoursForTest is how many engine hours are held loaded and how many the budget dropped.
func EngineHoursForTest(st *Store) (held, dropped int) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for h := range st.engines.blocks {
		if h >= 0 {
			held++
		}
	}
	return held, len(st.engines.dropped)
}

// H0ForTest is the start of the fixtures' first hour.
const H0ForTest = h0

// EngineHourBytesForTest is the bytes the budget counts for each engine hour held, by hour from the first.
func EngineHourBytesForTest(st *Store) map[int64]int64 {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := map[int64]int64{}
	for k, e := range st.mem.entries {
		if k.kind == heldEngine {
			out[k.hour-int64(h0/3600)] = e.bytes
		}
	}
	return out
}

// PhaseHoursForTest is how many phases hours the run has closed (their digests kept) and open (digested at every
// call), and how many are held whole (a dropped hour leaves a sparse remnant).
func PhaseHoursForTest(st *Store) (closed, open, held uint64) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, h := range st.phases.files.Hours() {
		if st.phases.files.Closed(h) {
			closed++
		} else {
			open++
		}
	}
	for h, b := range st.phases.blocks {
		if h >= 0 && !b.sparse {
			held++
		}
	}
	return closed, open, held
}

// PhaseRunForTest writes the 12-hour phases run of phases_reach_test.go.
func PhaseRunForTest(t *testing.T) string { return phaseRun(t) }
