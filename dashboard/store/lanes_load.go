package store

import (
	"os"
	"path/filepath"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// laneReader is the lane catalog (dashboard/lanes.json) and the lanes seen only in the data.
type laneReader struct {
	// set is every known lane, catalogued or seen, in display order.
	set *laneSet
	// catalogModTime is the catalog file's modification time when last read (zero: no catalog read).
	catalogModTime time.Time
	// unlisted are the lanes seen in the data but not (yet) in the catalog, by key.
	unlisted map[string]*Lane
}

func newLaneReader() laneReader { return laneReader{unlisted: map[string]*Lane{}} }

func (s *Store) loadLanesLocked() {
	path := filepath.Join(s.dir, runfiles.DashboardDir, runfiles.LaneCatalogFile)
	fi, err := os.Stat(path)
	if err != nil {
		s.lanes.set = newLaneSet(copyLanes(nil, s.lanes.unlisted))
		return
	}
	if !fi.ModTime().After(s.lanes.catalogModTime) && s.lanes.set != nil {
		return
	}
	m, err := loadCatalog(path)
	if err != nil {
		s.notice("warning", err.Error())
		if s.lanes.set == nil {
			s.lanes.set = newLaneSet(copyLanes(nil, s.lanes.unlisted))
		}
		return
	}
	s.lanes.catalogModTime = fi.ModTime()
	s.lanes.set = newLaneSet(copyLanes(m, s.lanes.unlisted))
}

func copyLanes(cat, extra map[string]*Lane) map[string]*Lane {
	out := map[string]*Lane{}
	for k, l := range extra {
		c := *l
		out[k] = &c
	}
	for k, l := range cat {
		c := *l
		out[k] = &c
	}
	return out
}

// laneSeen registers a lane found in the data that the catalog lacks (v1 runs without a catalog).
func (s *Store) laneSeen(key string) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if _, ok := s.lanes.set.byKey[key]; ok {
		return
	}
	node, gpu, ok := splitKey(key)
	if !ok {
		return
	}
	s.lanes.unlisted[key] = &Lane{Key: key, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
	s.lanes.set = newLaneSet(copyLanes(lanesMap(s.lanes.set), s.lanes.unlisted))
}

func lanesMap(ls *laneSet) map[string]*Lane {
	m := map[string]*Lane{}
	for _, l := range ls.lanes {
		m[l.Key] = l
	}
	return m
}
