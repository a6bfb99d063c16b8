package store

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

func (s *Store) loadMetaLocked() {
	s.meta = map[string]any{}
	b, err := os.ReadFile(filepath.Join(s.dir, runfiles.DashboardDir, runfiles.MetaFile))
	if err == nil {
		if err := json.Unmarshal(b, &s.meta); err != nil {
			s.notice("warning", "meta.json is unreadable: "+err.Error())
		}
	}
	s.layout = "miles-v1"
	if w, _ := s.meta["writer"].(string); w == "otelcol-miles" {
		s.layout = "otelcol-miles"
	}
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

// Meta describes the run and what it can show.
func (s *Store) Meta() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fields := map[string]bool{}
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
	streams := map[string]any{}
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files, s.metrics.files, s.topology.files, s.gpu.rollupFiles} {
		streams[f.Name] = map[string]any{"partitions": len(f.Parts)}
	}
	notices := make([]Notice, 0, len(s.notices))
	for _, n := range s.notices {
		notices = append(notices, n)
	}
	sort.Slice(notices, func(i, j int) bool { return notices[i].Message < notices[j].Message })
	memBytes, values := 0, 0
	for _, tb := range s.gpu.tails {
		memBytes += tb.b.memBytes()
		values += tb.b.values
	}
	var intervals []float64
	for _, b := range s.gpu.blocks {
		memBytes += b.memBytes()
		values += b.values
		for _, l := range b.lanes {
			if l.ts.Len() > 1 {
				intervals = append(intervals, l.ts.Interval()/1000)
			}
		}
	}
	gpuInterval := 0.0 // unknown until an hour is loaded
	if len(intervals) > 0 {
		sort.Float64s(intervals)
		gpuInterval = math.Round(intervals[len(intervals)/2]*1000) / 1000
	}
	runName, _ := s.meta["run_name"].(string)
	return map[string]any{
		"run_name": runName, "layout": s.layout, "schema_version": s.meta["schema_version"], "live": s.follow,
		"start_ts": s.first, "time_range": []float64{s.first, s.edge}, "data_edge": s.edge,
		"window_cap_s": WindowCap, "lanes_total": len(s.lanes.set.lanes), "streams": streams,
		"capabilities": map[string]any{
			"phases": len(s.phases.files.Parts) > 0, "gpu_util": len(s.gpu.utilFiles.Parts) > 0, "gpu_fields": fl,
			"metrics": len(s.metrics.files.Parts) > 0, "topology": len(s.topology.files.Parts) > 0,
			"engine_series": len(s.engines.files.Parts) > 0, "trajectories": len(s.trajectories.files.Parts) > 0,
		},
		"notices": notices,
		"memory": map[string]any{"gpu_bytes": memBytes, "gpu_values": values, "loaded_hours": len(s.gpu.blocks),
			"rollup_bytes": rollBytes, "rollup_hours": len(s.gpu.rollups)},
		// Typical seconds between GPU readings of a lane (median over loaded lanes), so a client never asks
		// for buckets finer than the data.
		"gpu_interval_s": gpuInterval,
	}
}

// Lanes resolves a selection.
func (s *Store) Lanes(sel string) ([]*Lane, int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, err := s.lanes.set.selectLanes(sel, s.topology.engineRanksLocked())
	return l, len(s.lanes.set.lanes), err
}
