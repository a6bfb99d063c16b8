package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// loadMetaLocked reads meta.json of every layout (the top-level one and each shard's) and merges them into
// the run's (docs/semconv.md §8.1): the top-level one's members first, then for each shard in id order the
// members not yet set; run_name the first non-empty; start_ts the earliest; starts the union, in time order.
func (s *Store) loadMetaLocked() {
	s.meta = map[string]any{}
	s.metaMods = s.metaModsLocked()
	start := math.Inf(1)
	var starts []float64
	for _, l := range s.layouts {
		b, err := runfiles.ReadFileMax(s.dir, filepath.Join(l.Dir, runfiles.MetaFile), runfiles.MaxMetaBytes)
		if errors.Is(err, runfiles.ErrTooLarge) || errors.Is(err, runfiles.ErrNotRegular) {
			s.notice("warning", runfiles.MetaFile+" ignored: "+err.Error())
		}
		if err != nil {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			name := runfiles.MetaFile
			if l.Shard != "" {
				name = filepath.Join(runfiles.ShardsDir, l.Shard, runfiles.MetaFile)
			}
			s.notice("warning", name+" is unreadable: "+err.Error())
			continue
		}
		for k, v := range m {
			if cur, ok := s.meta[k]; !ok || (k == "run_name" && cur == "") {
				s.meta[k] = v
			}
		}
		if v, ok := m["start_ts"].(float64); ok && v > 0 {
			start = math.Min(start, v)
		}
		if vs, ok := m["starts"].([]any); ok {
			for _, v := range vs {
				if f, ok := v.(float64); ok {
					starts = append(starts, f)
				}
			}
		}
	}
	if !math.IsInf(start, 1) {
		s.meta["start_ts"] = start
	}
	if starts != nil {
		sort.Float64s(starts)
		starts = slices.Compact(starts)
		all := make([]any, len(starts))
		for i, v := range starts {
			all[i] = v
		}
		s.meta["starts"] = all
	}
	s.layout = "miles-v1"
	if w, _ := s.meta["writer"].(string); w == "otelcol-miles" {
		s.layout = "otelcol-miles"
	}
}

// metaModsLocked is the modification time of every layout's meta.json ("" when there is none): a gateway
// writes its shard's at start, maybe after the shard folder appeared, and rewrites it at each restart.
func (s *Store) metaModsLocked() string {
	var b strings.Builder
	for _, l := range s.layouts {
		if fi, err := os.Stat(filepath.Join(l.Dir, runfiles.MetaFile)); err == nil {
			fmt.Fprintf(&b, "%s\x00%d\x00", l.Shard, fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// Window resolves a query window: missing ends default to the trailing window cap at the data edge; a window
// over the cap is an error.
func (s *Store) Window(t0, t1 *float64) (float64, float64, error) {
	s.mu.RLock()
	edge, first := s.edge, s.first
	s.mu.RUnlock()
	var a, b float64
	switch {
	case t0 != nil && t1 != nil:
		a, b = *t0, *t1
	case t1 != nil:
		a, b = *t1-WindowCap, *t1
	case t0 != nil:
		a, b = *t0, math.Min(*t0+WindowCap, math.Max(edge, *t0+1))
	default:
		b = edge
		if b <= first {
			b = first + 1
		}
		a = math.Max(first, b-WindowCap)
	}
	if math.IsNaN(a) || math.IsNaN(b) || b <= a {
		return 0, 0, fmt.Errorf("window t0=%v t1=%v is empty", a, b)
	}
	if b-a > WindowCap+1e-6 {
		return 0, 0, fmt.Errorf("window of %.0f s exceeds the cap of %.0f s (4 h)", b-a, WindowCap)
	}
	return a, b, nil
}

// MetaResult describes the run and what it can show (the meta endpoint's data). Fields are in the order of
// their JSON names.
type MetaResult struct {
	// Capabilities says which streams the run has and which GPU fields were seen.
	Capabilities MetaCapabilities `json:"capabilities"`
	// DataEdge is the newest timestamp seen.
	DataEdge float64 `json:"data_edge"`
	// GPUInterval is the typical seconds between GPU readings of a lane (median over the loaded lanes; 0 until
	// an hour is loaded), so a client never asks for buckets finer than the data.
	GPUInterval float64 `json:"gpu_interval_s"`
	// LanesTotal is how many lanes the run has.
	LanesTotal int `json:"lanes_total"`
	// Layout is "otelcol-miles" or "miles-v1".
	Layout string `json:"layout"`
	// Live says the run is followed as it is written.
	Live bool `json:"live"`
	// Memory is what the loaded GPU hours hold.
	Memory MetaMemory `json:"memory"`
	// Notices are the data problems to show, by message.
	Notices []Notice `json:"notices"`
	// RunName is meta.json's run_name.
	RunName string `json:"run_name"`
	// SchemaVersion is meta.json's schema_version as written (null when absent).
	SchemaVersion any `json:"schema_version"`
	// Shards are the shards of a sharded run (docs/semconv.md §8), in id order; empty for an unsharded run.
	Shards []ShardStatus `json:"shards"`
	// StartTS is the run's first timestamp.
	StartTS float64 `json:"start_ts"`
	// Streams counts the partitions of the GPU, phases, metrics and topology streams, by stream name.
	Streams map[string]MetaStream `json:"streams"`
	// TimeRange is [StartTS, DataEdge].
	TimeRange [2]float64 `json:"time_range"`
	// WindowCap is the longest window a query may ask for, in seconds.
	WindowCap float64 `json:"window_cap_s"`
}

// MetaCapabilities says which streams a run has.
type MetaCapabilities struct {
	// EngineSeries: the run has engine_series partitions.
	EngineSeries bool `json:"engine_series"`
	// GPUFields are the GPU fields seen in the loaded hours and the first record of the newest one, sorted.
	GPUFields []string `json:"gpu_fields"`
	// GPUUtil: the run has gpu_util partitions.
	GPUUtil bool `json:"gpu_util"`
	// Metrics: the run has metrics partitions.
	Metrics bool `json:"metrics"`
	// Phases: the run has phases partitions.
	Phases bool `json:"phases"`
	// Topology: the run has topology partitions.
	Topology bool `json:"topology"`
	// Trajectories: the run has trajectories partitions.
	Trajectories bool `json:"trajectories"`
}

// MetaMemory is what the loaded GPU hours hold.
type MetaMemory struct {
	// GPUBytes is the memory of the loaded gpu_util hours and tails.
	GPUBytes int `json:"gpu_bytes"`
	// GPUValues is how many values they hold.
	GPUValues int `json:"gpu_values"`
	// LoadedHours is how many gpu_util hours are loaded.
	LoadedHours int `json:"loaded_hours"`
	// RollupBytes is the memory of the loaded gpu_rollup hours.
	RollupBytes int `json:"rollup_bytes"`
	// RollupHours is how many gpu_rollup hours are loaded.
	RollupHours int `json:"rollup_hours"`
}

// MetaStream is one stream's entry in MetaResult.Streams.
type MetaStream struct {
	// Partitions is how many hourly partitions the stream has.
	Partitions int `json:"partitions"`
}

// Meta describes the run and what it can show.
func (s *Store) Meta() *MetaResult {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fields := map[string]bool{}
	for _, f := range s.gpu.hintFields { // before any hour is loaded
		fields[f] = true
	}
	maps.Copy(fields, s.gpu.droppedFields) // hours the memory budget dropped
	for _, b := range s.gpu.blocks {
		for f := range b.fields {
			fields[f] = true
		}
	}
	rollBytes := 0
	for _, b := range s.gpu.rollups {
		for f := range b.fields {
			fields[f] = true
		}
		rollBytes += b.memBytes()
	}
	fl := make([]string, 0, len(fields))
	for f := range fields {
		fl = append(fl, f)
	}
	sort.Strings(fl)
	streams := map[string]MetaStream{}
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files, s.metrics.files, s.topology.files, s.gpu.rollupFiles} {
		streams[f.Name] = MetaStream{Partitions: len(f.Parts)}
	}
	shards := s.shardStatusLocked()
	notices := s.noticesLocked(shards)
	memBytes, values := 0, 0
	for _, tb := range s.gpu.tails {
		memBytes += tb.b.memBytes()
		values += tb.b.values
	}
	for _, b := range s.gpu.blocks {
		memBytes += b.memBytes()
		values += b.values
	}
	interval := gpuInterval(slices.Collect(maps.Values(s.gpu.blocks)))
	if interval == 0 {
		interval = s.gpu.lastInterval // every hour dropped by the memory budget since
	}
	runName, _ := s.meta["run_name"].(string)
	return &MetaResult{
		RunName: runName, Layout: s.layout, SchemaVersion: s.meta["schema_version"], Live: s.follow,
		StartTS: s.first, TimeRange: [2]float64{s.first, s.edge}, DataEdge: s.edge,
		WindowCap: WindowCap, LanesTotal: len(s.lanes.set.lanes), Streams: streams,
		Capabilities: MetaCapabilities{
			Phases: len(s.phases.files.Parts) > 0, GPUUtil: len(s.gpu.utilFiles.Parts) > 0, GPUFields: fl,
			Metrics: len(s.metrics.files.Parts) > 0, Topology: len(s.topology.files.Parts) > 0,
			EngineSeries: len(s.engines.files.Parts) > 0, Trajectories: len(s.trajectories.files.Parts) > 0,
		},
		Notices: notices, Shards: nz(shards),
		Memory: MetaMemory{
			GPUBytes: memBytes, GPUValues: values, LoadedHours: len(s.gpu.blocks),
			RollupBytes: rollBytes, RollupHours: len(s.gpu.rollups),
		},
		GPUInterval: interval,
	}
}

// noticesLocked is the data problems to show, in message order: the notices kept, and one per stalled shard
// (derived from the shard statuses, so it goes when the shard writes again).
func (s *Store) noticesLocked(shards []ShardStatus) []Notice {
	out := make([]Notice, 0, len(s.notices))
	for _, n := range s.notices {
		out = append(out, n)
	}
	for _, st := range shards {
		if st.Stalled {
			out = append(out, Notice{Level: "warning", Message: fmt.Sprintf("shard %s stopped growing: its newest record trails the run's by more than %.0f s while the other shards go on (see shards)", st.ID, shardStallAfter)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
}

// gpuInterval is the median reading interval of the blocks' lanes, in seconds (0: unknown, no hour loaded).
func gpuInterval(blocks []*gpuBlock) float64 {
	var intervals []float64
	for _, b := range blocks {
		for _, l := range b.lanes {
			if l.ts.Len() > 1 {
				intervals = append(intervals, l.ts.Interval()/1000)
			}
		}
	}
	if len(intervals) == 0 {
		return 0
	}
	sort.Float64s(intervals)
	return math.Round(intervals[len(intervals)/2]*1000) / 1000
}
