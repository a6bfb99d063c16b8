package store

import (
	"encoding/json"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// topologyReader reads the engine topology snapshots (which engine serves which ranks and GPUs): every record,
// read at Open and tailed.
type topologyReader struct {
	// run is the store whose lock and notices the reader shares.
	run *Store
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// snapshots are every snapshot read, by time.
	snapshots []topoRec
}

func newTopologyReader(run *Store) topologyReader {
	return topologyReader{run: run, files: partition.NewStream(run.dir, sc.StreamTopology)}
}

func (r *topologyReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the stream; a new snapshot changes lane selections, not the views' data.
func (r *topologyReader) refreshLocked(int64) bool {
	r.loadLocked()
	return false
}

type topoRec struct {
	TS      float64 `json:"ts"`
	Engines []struct {
		Addr       string  `json:"addr"`
		WorkerType string  `json:"worker_type"`
		EngineRank int     `json:"engine_rank"`
		GPUs       [][]any `json:"gpus"`
	} `json:"engines"`
}

func (r *topologyReader) loadLocked() {
	for _, h := range r.files.Hours() {
		p := r.files.Parts[h]
		reports, err := r.files.Read(p, func(line []byte) bool {
			var rec topoRec
			if json.Unmarshal(line, &rec) != nil || rec.TS <= 0 {
				return false
			}
			r.snapshots = append(r.snapshots, rec)
			return true
		})
		if err == partition.ErrReload {
			continue
		}
		r.run.report(reports, err)
	}
	sort.SliceStable(r.snapshots, func(i, j int) bool { return r.snapshots[i].TS < r.snapshots[j].TS })
}

// engineRanksLocked maps engine_rank → addr from the newest topology snapshot.
func (r *topologyReader) engineRanksLocked() map[int]string {
	m := map[int]string{}
	if len(r.snapshots) == 0 {
		return m
	}
	for _, e := range r.snapshots[len(r.snapshots)-1].Engines {
		m[e.EngineRank] = e.Addr
	}
	return m
}
