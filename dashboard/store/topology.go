package store

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// topologyReader reads the engine topology snapshots (which engine serves which ranks and GPUs): every record,
// read at Open and tailed.
type topologyReader struct {
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// snapshots are every snapshot read, by time.
	snapshots []topoRec
	// lanes is what the snapshots say of each GPU lane, by lane key (index).
	lanes map[string]*topoLane
	// rankAddrs are every address each engine rank had, in order of first appearance.
	rankAddrs map[int][]string
}

// topoLane is what the topology says of one GPU lane: every engine that ever covered it (each address once, in
// order of first appearance: an engine restarted on a new port adds its new address) and its UUID.
type topoLane struct {
	engines []string
	uuid    string
}

func newTopologyReader(dir string) topologyReader {
	return topologyReader{files: partition.NewStream(dir, sc.StreamTopology)}
}

func (r *topologyReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// hourCaches: none, the stream is held whole.
func (r *topologyReader) hourCaches() []hourSource { return nil }

// refreshLocked tails the stream; a new snapshot changes the lanes (their engines, roles and UUIDs) and so lane
// selections and the meta version, not the views' data.
func (r *topologyReader) refreshLocked(ld loadApplier, _ int64) bool {
	if !r.loadLocked(ld) {
		return false
	}
	ld.lanesChangedLocked()
	return true
}

type topoRec struct {
	TS      float64 `json:"ts"`
	Engines []struct {
		Addr       string  `json:"addr"`
		WorkerType string  `json:"worker_type"`
		EngineRank int     `json:"engine_rank"`
		GPUs       [][]any `json:"gpus"`
		// GPUUUIDs are the UUIDs of GPUs, same order (miles v1 writes null for one it could not read).
		GPUUUIDs []*string `json:"gpu_uuids"`
	} `json:"engines"`
}

// loadLocked reads what the stream gained, handing the reports to ld, and says whether it gained a snapshot.
func (r *topologyReader) loadLocked(ld loadApplier) bool {
	n := len(r.snapshots)
	if r.readLocked(ld) {
		// An hour was rewritten under us (compaction, a late frame, crash repair): the stream is a few dozen
		// snapshots, so it is read over from the start rather than per hour.
		for _, p := range r.files.Parts {
			p.Reset()
		}
		r.snapshots = nil
		n = -1
		r.readLocked(ld)
	}
	if len(r.snapshots) == n && r.lanes != nil {
		return false
	}
	sort.SliceStable(r.snapshots, func(i, j int) bool { return r.snapshots[i].TS < r.snapshots[j].TS })
	r.index()
	return true
}

// readLocked appends the snapshots the stream's hours gained and says whether one hour asks to be read over.
func (r *topologyReader) readLocked(ld loadApplier) (reload bool) {
	for _, h := range r.files.Hours() {
		p := r.files.Parts[h]
		var l hourLoad
		l.reports, l.err = r.files.Read(p, func(line []byte) bool {
			var rec topoRec
			if json.Unmarshal(line, &rec) != nil || rec.TS <= 0 {
				return false
			}
			r.snapshots = append(r.snapshots, rec)
			return true
		})
		if errors.Is(l.err, partition.ErrReload) {
			reload = true
			continue
		}
		ld.learnedLocked(&l)
	}
	return reload
}

// index derives the lanes' engines and UUIDs and the ranks' addresses from every snapshot (a few dozen: only
// changed snapshots are written). A snapshot's gpus pair that is not [node, index] names no lane; lanes whose
// key is over the lane key limit are left out (laneKeyMax).
func (r *topologyReader) index() {
	r.lanes, r.rankAddrs = map[string]*topoLane{}, map[int][]string{}
	for _, snap := range r.snapshots {
		for _, e := range snap.Engines {
			if e.Addr == "" {
				continue
			}
			if !slices.Contains(r.rankAddrs[e.EngineRank], e.Addr) {
				r.rankAddrs[e.EngineRank] = append(r.rankAddrs[e.EngineRank], e.Addr)
			}
			for i, g := range e.GPUs {
				key, ok := topoLaneKey(g)
				if !ok {
					continue
				}
				tl := r.lanes[key]
				if tl == nil {
					if len(r.lanes) >= laneCap {
						continue
					}
					tl = &topoLane{}
					r.lanes[key] = tl
				}
				if !slices.Contains(tl.engines, e.Addr) {
					tl.engines = append(tl.engines, e.Addr)
				}
				if i < len(e.GPUUUIDs) && e.GPUUUIDs[i] != nil && *e.GPUUUIDs[i] != "" && len(*e.GPUUUIDs[i]) <= laneKeyMax {
					tl.uuid = *e.GPUUUIDs[i] // the newest snapshot's, should a GPU have been swapped
				}
			}
		}
	}
}

// topoLaneKey is the lane key of a topology gpus pair [node_ip, gpu_id].
func topoLaneKey(g []any) (string, bool) {
	if len(g) != 2 {
		return "", false
	}
	node, _ := g[0].(string)
	gi, ok := g[1].(float64)
	if !ok || node == "" || gi < 0 || gi != float64(int(gi)) {
		return "", false
	}
	key := node + ":" + itoa(int(gi))
	return key, len(key) <= laneKeyMax
}

// engineRanksLocked maps each engine_rank to every address it had in the topology (a restarted engine keeps
// its rank on a new port).
func (r *topologyReader) engineRanksLocked() map[int][]string { return r.rankAddrs }
