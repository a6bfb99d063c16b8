package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// laneReader is the lane catalog (dashboard/lane_catalog.json), the lanes seen only in the data, and what the
// topology adds to both (rebuildLanesLocked).
type laneReader struct {
	// set is every known lane, cataloged, seen or in the topology, in display order.
	set *laneSet
	// catalog are the lanes of the catalog as last read, by key.
	catalog map[string]*Lane
	// catalogModTime is the catalog file's modification time when last read (zero: no catalog read).
	catalogModTime time.Time
	// unlisted are the lanes seen in the data but not (yet) in the catalog, by key.
	unlisted map[string]*Lane
}

func newLaneReader() laneReader { return laneReader{unlisted: map[string]*Lane{}} }

func (s *Store) loadLanesLocked() {
	path := filepath.Join(s.dir, runfiles.DashboardDir, runfiles.LaneCatalogFile)
	fi, err := os.Stat(path)
	if err != nil || !runfiles.Within(s.dir, path) {
		s.lanes.catalog = nil
		s.rebuildLanesLocked()
		return
	}
	if !fi.ModTime().After(s.lanes.catalogModTime) && s.lanes.set != nil {
		return
	}
	m, skips, err := loadCatalog(path)
	if skips.overCap {
		s.notice("warning", fmt.Sprintf("%s lists more than %d lanes (the collector's limit, docs/semconv.md §8.4): only the first %d are shown", runfiles.LaneCatalogFile, laneCap, laneCap))
	}
	if skips.longKey > 0 {
		s.notice("warning", fmt.Sprintf("%s: %d lane(s) with a key over %d bytes left out", runfiles.LaneCatalogFile, skips.longKey, laneKeyMax))
	}
	if err != nil {
		s.notice("warning", err.Error())
		if s.lanes.set == nil {
			s.rebuildLanesLocked()
		}
		return
	}
	s.lanes.catalogModTime = fi.ModTime()
	s.lanes.catalog = m
	s.rebuildLanesLocked()
}

// rebuildLanesLocked makes the lane set from the catalog, the lanes seen in the data, and the topology: a
// miles v1 catalog is flushed from the records of its time (an engine restarted on a new port after the last
// flush is missing from it, and it never holds UUIDs) and older v1 runs have none, so every lane an engine ever
// covered gets that engine's address, the rollout role, and the UUID the snapshot gives (docs/dashboard-api.md,
// lanes). The caller holds mu for writing, or lmu during a load.
func (s *Store) rebuildLanesLocked() {
	m := copyLanes(s.lanes.catalog, s.lanes.unlisted)
	for key, tl := range s.topology.lanes {
		l := m[key]
		if l == nil {
			node, gpu, ok := splitKey(key)
			if !ok || len(m) >= laneCap {
				continue
			}
			l = &Lane{Key: key, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
			m[key] = l
		}
		engines := slices.Clone(l.Engines)
		for _, a := range tl.engines {
			if !slices.Contains(engines, a) {
				engines = append(engines, a)
			}
		}
		l.Engines = engines
		if !slices.Contains(l.Roles, "rollout") {
			l.Roles = append(slices.Clone(l.Roles), "rollout")
			slices.Sort(l.Roles)
		}
		if l.UUID == "" {
			l.UUID = tl.uuid
		}
	}
	s.lanes.set = newLaneSet(m)
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
	if !ok || len(key) > laneKeyMax {
		return
	}
	if len(s.lanes.set.lanes) >= laneCap {
		// Noticed once (lmu is held: no notice call), and the set is not rebuilt for each lane over the cap.
		msg := fmt.Sprintf("more than %d lanes in the data (the collector's limit, docs/semconv.md §8.4): the rest are not shown", laneCap)
		s.notices[msg] = Notice{Level: "warning", Message: msg}
		return
	}
	s.lanes.unlisted[key] = &Lane{Key: key, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
	s.rebuildLanesLocked()
}
