package store

import (
	"errors"
	"fmt"
	"maps"
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
	// catalogModTime is the newest modification time of the catalogs read (zero: no catalog read).
	catalogModTime time.Time
	// catalogs are the layouts' catalogs as last read, by path.
	catalogs map[string]layoutCatalog
	// unlisted are the lanes seen in the data but not (yet) in the catalog, by key.
	unlisted map[string]*Lane
	// nodes is the union of the catalogs' nodes tables (host name → addresses), for the node identity.
	nodes catalogNodes
}

func newLaneReader() laneReader {
	return laneReader{unlisted: map[string]*Lane{}, catalogs: map[string]layoutCatalog{}}
}

// loadLanesLocked reads the lane catalog of every layout (the top-level one and each shard's) that changed
// since it was last read, and merges them (mergeCatalogs).
func (s *Store) loadLanesLocked() {
	changed := false
	seen := map[string]bool{}
	for _, l := range s.layouts {
		path := filepath.Join(l.Dir, runfiles.LaneCatalogFile)
		seen[path] = true
		absent := func() { // a catalog gone (or behind a link out of the run) is forgotten
			if _, had := s.lanes.catalogs[path]; had {
				delete(s.lanes.catalogs, path)
				changed = true
			}
		}
		fi, err := os.Stat(path)
		if err != nil {
			absent()
			continue
		}
		prev, had := s.lanes.catalogs[path]
		if had && !fi.ModTime().After(prev.modTime) {
			continue
		}
		name := runfiles.LaneCatalogFile
		if l.Shard != "" {
			name = filepath.Join(runfiles.ShardsDir, l.Shard, runfiles.LaneCatalogFile)
		}
		m, nodes, skips, err := loadCatalog(s.dir, path)
		if errors.Is(err, runfiles.ErrOutsideRun) { // a link out of the run is absent (docs/dashboard-api.md)
			absent()
			continue
		}
		if skips.overCap {
			s.notice("warning", fmt.Sprintf("%s lists more than %d lanes (the collector's limit, docs/semconv.md §8.4): only the first %d are shown", name, laneCap, laneCap))
		}
		if skips.longKey > 0 {
			s.notice("warning", fmt.Sprintf("%s: %d lane(s) with a key over %d bytes left out", name, skips.longKey, laneKeyMax))
		}
		if err != nil {
			s.notice("warning", err.Error())
			continue // the previous read of it (if any) stands
		}
		s.lanes.catalogs[path] = layoutCatalog{lanes: m, nodes: nodes, modTime: fi.ModTime()}
		changed = true
	}
	for path := range s.lanes.catalogs {
		if !seen[path] {
			delete(s.lanes.catalogs, path)
			changed = true
		}
	}
	if !changed && s.lanes.set != nil {
		return
	}
	s.lanes.catalogModTime = time.Time{}
	var all []map[string]*Lane
	s.lanes.nodes = catalogNodes{}
	for _, l := range s.layouts { // layout order: the merge is the same whatever order files changed in
		if c, ok := s.lanes.catalogs[filepath.Join(l.Dir, runfiles.LaneCatalogFile)]; ok {
			all = append(all, c.lanes)
			for host, ips := range c.nodes {
				for _, ip := range ips {
					if !slices.Contains(s.lanes.nodes[host], ip) {
						s.lanes.nodes[host] = append(s.lanes.nodes[host], ip)
					}
				}
				if s.lanes.nodes[host] == nil {
					s.lanes.nodes[host] = []string{}
				}
			}
			if c.modTime.After(s.lanes.catalogModTime) {
				s.lanes.catalogModTime = c.modTime
			}
		}
	}
	s.lanes.catalog = mergeCatalogs(all)
	s.rebuildLanesLocked()
}

// layoutCatalog is one layout's lane catalog as last read.
type layoutCatalog struct {
	lanes   map[string]*Lane
	nodes   catalogNodes
	modTime time.Time
}

// mergeCatalogs is the union of the layouts' catalogs, each shard's gateway having seen the lanes of the
// records it wrote (docs/semconv.md §8.2): a lane in several keeps the first UUID and model given, and the
// union of ranks (sorted), engine addresses (in order of first appearance) and roles (sorted); at most
// laneCap lanes.
func mergeCatalogs(cats []map[string]*Lane) map[string]*Lane {
	if len(cats) == 1 {
		return cats[0]
	}
	out := map[string]*Lane{}
	for _, cat := range cats {
		keys := slices.Sorted(maps.Keys(cat))
		for _, k := range keys {
			l := cat[k]
			m := out[k]
			if m == nil {
				if len(out) >= laneCap {
					continue
				}
				c := *l
				c.Ranks, c.Engines, c.Roles = slices.Clone(l.Ranks), slices.Clone(l.Engines), slices.Clone(l.Roles)
				out[k] = &c
				continue
			}
			mergeLane(m, l)
		}
	}
	return out
}

// rebuildLanesLocked makes the lane set from the catalog, the lanes seen in the data, and the topology: a
// miles v1 catalog is flushed from the records of its time (an engine restarted on a new port after the last
// flush is missing from it, and it never holds UUIDs) and older v1 runs have none, so every lane an engine ever
// covered gets that engine's address, the rollout role, and the UUID the snapshot gives (docs/dashboard-api.md,
// lanes). Every lane is named by the node identity (docs/semconv.md §1): the names one GPU has in the catalog,
// the data and the topology become one lane, and the other names are kept as aliases of it. The caller holds
// mu for writing.
func (s *Store) rebuildLanesLocked() {
	raw := copyLanes(s.lanes.catalog, s.lanes.unlisted)
	var uuids []laneUUID
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		uuids = append(uuids, laneUUID{k, raw[k].UUID})
	}
	for _, k := range slices.Sorted(maps.Keys(s.topology.lanes)) {
		uuids = append(uuids, laneUUID{k, s.topology.lanes[k].uuid})
	}
	ids := newNodeIdentity(s.lanes.nodes, uuids)
	m := map[string]*Lane{}
	alias := map[string]string{}
	canon := func(key, uuid string) (*Lane, bool) {
		k := ids.key(key, uuid)
		if k != key {
			alias[key] = k
		}
		if l := m[k]; l != nil {
			return l, true
		}
		node, gpu, ok := splitKey(k)
		if !ok || len(m) >= laneCap {
			return nil, false
		}
		l := &Lane{Key: k, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
		m[k] = l
		return l, true
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if l, ok := canon(k, raw[k].UUID); ok {
			mergeLane(l, raw[k])
		}
	}
	for _, key := range slices.Sorted(maps.Keys(s.topology.lanes)) {
		tl := s.topology.lanes[key]
		l, ok := canon(key, tl.uuid)
		if !ok {
			continue
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
	s.lanes.set.ids = ids
	for a, k := range alias {
		if _, own := s.lanes.set.byKey[a]; !own {
			s.lanes.set.byKey[a] = s.lanes.set.byKey[k]
		}
	}
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

// lanesSeen registers the lanes found in the data that the catalog lacks (v1 runs without a catalog): the new
// lanes of an hour once it is read, the lane set rebuilt once for them. The caller holds mu for writing.
func (s *Store) lanesSeen(keys []string) {
	if len(keys) == 0 {
		return
	}
	n, added := len(s.lanes.set.lanes), false
	for _, key := range keys {
		if _, ok := s.lanes.set.byKey[key]; ok || s.lanes.unlisted[key] != nil {
			continue
		}
		node, gpu, ok := splitKey(key)
		if !ok || len(key) > laneKeyMax {
			continue
		}
		if n >= laneCap {
			s.notice("warning", fmt.Sprintf("more than %d lanes in the data (the collector's limit, docs/semconv.md §8.4): the rest are not shown", laneCap))
			break
		}
		s.lanes.unlisted[key] = &Lane{Key: key, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
		n++
		added = true
	}
	if added {
		s.rebuildLanesLocked()
	}
}
