package store

import "math"

// Engine hour digests: a caller's reduction of each engine_series hour (the advisory's statistics,
// dashboard/advisory), kept per closed hour so that a reader of the whole run never needs the points of an hour
// the memory budget dropped (docs/operations.md "Memory"). An hour that changes (late records, a file read
// again with other points) loses its digests; an open hour is reduced again at every call.

// EngineDigest is one hour's value of a digest function.
type EngineDigest struct {
	Hour  int64 // Unix hour; partition.LegacyHour for a miles v1 flat file
	Value any
}

// engDigester is a digest function the store applies to each closed hour as it loads it.
type engDigester struct {
	metrics []string
	fn      func(hour int64, raws map[string][]EngineRaw) any
}

// EngineDigests reduces every engine hour, in time order, with fn applied to the hour's series of metrics (by
// metric, as EngineRawSeries would return them for that hour alone). A closed hour's value is kept under key
// until the hour changes, and computed as the hour loads from then on (the key catalog's cold reading included),
// so an hour the budget dropped is read again only if it changed. Hours read for this call alone are left least
// recently used: the whole-run reduction does not push out the hours the pages read.
func (s *Store) EngineDigests(key string, metrics []string, fn func(hour int64, raws map[string][]EngineRaw) any) []EngineDigest {
	s.mu.Lock()
	r := &s.engines
	if _, ok := r.digesters[key]; !ok {
		r.digesters[key] = engDigester{metrics: metrics, fn: fn}
	}
	s.mu.Unlock()
	// The hours never read first, each under the lock alone (loadEngineCatalog): a closed hour is digested as
	// it loads. Then, as alone, the closed hours still without the digest (the catalog's figures came from the
	// cache directory, or the budget dropped the hour before the digest was asked for); the pass below reads
	// none but the open hours and those the budget dropped since.
	s.loadEngineCatalog()
	tried := map[int64]bool{}
	s.engineHoursAlone(func() (int64, bool) {
		h, ok := r.undigestedLocked(key, tried)
		if ok {
			tried[h] = true
		}
		return h, ok
	}, func(h int64) {
		s.loadEngineHourLocked(h) // a closed hour is digested as it loads
		s.settleColdLocked(heldEngine, h)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	hours := r.files.Hours()
	out := make([]EngineDigest, 0, len(hours))
	for _, h := range hours {
		if v, ok := r.digests[h][key]; ok {
			out = append(out, EngineDigest{h, v})
			continue
		}
		read := !r.files.Parts[h].Loaded
		if read {
			s.loadLocked(r.cache.jobs([]int64{h}, hourRead{})) // a closed hour is digested as it loads
		}
		if p := r.files.Parts[h]; p.Loaded && r.hourClosedLocked(h, p) {
			r.digestLocked(h) // closed, loaded before the digest was asked for
		}
		v, ok := r.digests[h][key]
		if !ok { // open: reduced at every call
			v = fn(h, r.rawHourLocked(metrics, h))
		}
		out = append(out, EngineDigest{h, v})
		if read {
			s.settleColdLocked(heldEngine, h) // hour by hour: a long run opened cold never holds all its hours
		}
	}
	r.allLoaded = true
	return out
}

// undigestedLocked is the oldest closed engine hour not loaded that lacks digest key, not in tried; false when
// none is.
func (r *engineReader) undigestedLocked(key string, tried map[int64]bool) (int64, bool) {
	for _, h := range r.files.Hours() {
		p := r.files.Parts[h]
		if _, ok := r.digests[h][key]; ok || p.Loaded || tried[h] || !r.hourClosedLocked(h, p) {
			continue
		}
		return h, true
	}
	return 0, false
}

// EngineHourRaw is one hour's series of metrics, by metric (an hour read back if the budget dropped it, left
// least recently used).
func (s *Store) EngineHourRaw(metrics []string, hour int64) map[string][]EngineRaw {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.engines
	p := r.files.Parts[hour]
	if p == nil {
		return map[string][]EngineRaw{}
	}
	read := !p.Loaded
	if read {
		s.loadLocked(r.cache.jobs([]int64{hour}, hourRead{}))
	}
	out := r.rawHourLocked(metrics, hour)
	if read {
		s.settleColdLocked(heldEngine, hour)
	}
	return out
}

// rawHourLocked is the hour's series of metrics, by metric (metrics with none left out).
func (r *engineReader) rawHourLocked(metrics []string, hour int64) map[string][]EngineRaw {
	out := make(map[string][]EngineRaw, len(metrics))
	only := []int64{hour}
	for _, m := range metrics {
		if rs := r.rawHoursLocked(m, math.Inf(-1), math.Inf(1), only); len(rs) > 0 {
			out[m] = rs
		}
	}
	return out
}

// digestLocked computes the registered digests the closed hour h lacks.
func (r *engineReader) digestLocked(h int64) {
	for key, d := range r.digesters {
		if _, ok := r.digests[h][key]; ok {
			continue
		}
		if r.digests[h] == nil {
			r.digests[h] = map[string]any{}
		}
		r.digests[h][key] = d.fn(h, r.rawHourLocked(d.metrics, h))
	}
}
