package store

// Explorer data (issue 8): step metrics by key, engine series, trajectories. This file holds the state those
// readers share inside Store and the two hooks store.go calls (Open, Refresh); the readers are in metrics.go,
// engines.go and trajectories.go. Every stream is tailed through streamFiles/partition (tail.go), so offsets,
// compaction, truncation and corrupt-line notices work exactly as for GPU and phases.

import (
	"math"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// exState is the explorer's part of a Store; guarded by Store.mu like the rest.
type exState struct {
	met metricsIndex

	engF      *streamFiles
	eng       map[int64]*engBlock
	engLoaded bool // every engine hour loaded once (the advisory and whole-run catalogues need them all)
	engVer    uint64

	trajIdxF *streamFiles // step index pass (step_consume and weight_update records only)
	trajF    *streamFiles // hour blocks, loaded on demand
	tidx     trajIndex
	traj     map[int64]*trajBlock
	trajVer  uint64
	strs     interner
	anat     anatomyCache
}

// initExplorerLocked is called by Open: it lists the explorer's streams, parsing nothing.
func (s *Store) initExplorerLocked() {
	s.ex.engF = newStreamFiles(s.dir, sc.StreamEngineSeries)
	s.ex.trajIdxF = newStreamFiles(s.dir, sc.StreamTrajectories)
	s.ex.trajF = newStreamFiles(s.dir, sc.StreamTrajectories)
	s.ex.eng = map[int64]*engBlock{}
	s.ex.traj = map[int64]*trajBlock{}
	s.ex.strs.init()
	s.ex.met.init()
	s.ex.tidx.init()
	for _, f := range []*streamFiles{s.ex.engF, s.ex.trajIdxF, s.ex.trajF} {
		if err := f.list(); err != nil {
			s.notice("error", f.name+": "+err.Error())
		}
	}
}

// refreshExplorerLocked is called by Refresh: it tails whatever the explorer already reads (nothing is loaded
// for the first time here, except the hour after a loaded one so a follower never misses the rollover) and says
// whether anything grew.
func (s *Store) refreshExplorerLocked() bool {
	grew := false
	for _, f := range []*streamFiles{s.ex.engF, s.ex.trajIdxF, s.ex.trajF} {
		if err := f.list(); err != nil {
			s.notice("error", f.name+": "+err.Error())
		}
	}
	if s.ex.met.built {
		if s.syncMetricsLocked() {
			grew = true
		}
	}
	// Once the catalogue has looked at engines (even finding none), keep following them: engine series that
	// first appear after the page opened (engines registered late) must still show up.
	if len(s.ex.eng) > 0 || s.ex.engLoaded {
		before := s.ex.engVer
		newest := newestHour(s.ex.engF)
		for _, h := range s.ex.engF.hours() {
			if p := s.ex.engF.parts[h]; p.loaded || h >= newest-1 {
				s.loadEngineHourLocked(h)
			}
		}
		grew = grew || s.ex.engVer != before
	}
	if s.ex.tidx.built {
		before := s.ex.tidx.ver
		s.indexTrajectoriesLocked()
		grew = grew || s.ex.tidx.ver != before
	}
	if len(s.ex.traj) > 0 {
		before := s.ex.trajVer
		newest := newestHour(s.ex.trajF)
		for _, h := range s.ex.trajF.hours() {
			if p := s.ex.trajF.parts[h]; p.loaded || h >= newest-1 {
				s.loadTrajHourLocked(h)
			}
		}
		grew = grew || s.ex.trajVer != before
	}
	return grew
}

func newestHour(f *streamFiles) int64 {
	hs := f.hours()
	if len(hs) == 0 {
		return math.MinInt64 / 2
	}
	return hs[len(hs)-1]
}

// explorerCapsLocked reports which explorer streams exist (for Meta's capabilities).
func (s *Store) hasStreamLocked(f *streamFiles) bool { return f != nil && len(f.parts) > 0 }

// interner maps short strings (engine addresses, statuses) to small integers; index 0 is "".
type interner struct {
	idx  map[string]uint16
	strs []string
}

func (in *interner) init() {
	in.idx = map[string]uint16{"": 0}
	in.strs = []string{""}
}

func (in *interner) id(b []byte) uint16 {
	if len(b) == 0 {
		return 0
	}
	if i, ok := in.idx[string(b)]; ok {
		return i
	}
	if len(in.strs) >= math.MaxUint16 {
		return 0 // absurd cardinality: keep the record, drop the string
	}
	s := string(b)
	i := uint16(len(in.strs))
	in.idx[s] = i
	in.strs = append(in.strs, s)
	return i
}

func (in *interner) str(i uint16) string {
	if int(i) < len(in.strs) {
		return in.strs[i]
	}
	return ""
}
