package store

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Fuzzing the stream readers through the files, the way a run directory reaches them: the fuzzed bytes are a
// block of lines inside one stream's partition, between a good record of that stream before and one after. Every
// query a page can make must answer (no panic, no hang), and the good records around the block must still be
// read: bad input loses nothing else (docs/reliability.md "hostile input"). The seeds in testdata/fuzz/<target>
// are real records of each stream as the exporter writes them, and run as plain tests in `go test`.
//
// The sentinels' names ("fz_sentinel", "fz-node", …) appear in no seed, so a fuzzed record can only overwrite
// them by guessing them.

const fzHour = hourA

// fzGood are the stream's good records written before and after the fuzzed block.
var fzGood = map[string][2]string{
	"phases": {
		fmt.Sprintf(`{"name":"fz_sentinel_before","t0":%g,"t1":%g,"node":"fz-node","rank":7,"role":"train","gpus":[7],"step":1,"span":"fz01"}`, h0+10, h0+20),
		fmt.Sprintf(`{"name":"fz_sentinel_after","t0":%g,"t1":%g,"node":"fz-node","rank":7,"role":"train","gpus":[7],"step":1,"span":"fz02"}`, h0+30, h0+40),
	},
	"gpu_util": {
		fmt.Sprintf(`{"ts":%g,"node":"fz-node","gpu":7,"util":11,"mem_mb":1000,"power_w":100}`, h0+100),
		fmt.Sprintf(`{"ts":%g,"node":"fz-node","gpu":7,"util":12,"mem_mb":1000,"power_w":100}`, h0+200),
	},
	"metrics": {
		fmt.Sprintf(`{"ts":%g,"step_key":"rollout/step","step":1,"metrics":{"fz/sentinel_before":1}}`, h0+10),
		fmt.Sprintf(`{"ts":%g,"step_key":"rollout/step","step":2,"metrics":{"fz/sentinel_after":2}}`, h0+20),
	},
	"engine_series": {
		fmt.Sprintf(`{"ts":%g,"addr":"http://fz-engine","m":{"fz:sentinel_before":1}}`, h0+10),
		fmt.Sprintf(`{"ts":%g,"addr":"http://fz-engine","m":{"fz:sentinel_after":2}}`, h0+20),
	},
	"trajectories": {
		fmt.Sprintf(`{"type":"step_consume","t0":%g,"t1":%g,"trace":%q,"span":"00000000000fz001","step":4241,"links":[]}`, h0+50, h0+51, tid(4241)),
		fmt.Sprintf(`{"type":"step_consume","t0":%g,"t1":%g,"trace":%q,"span":"00000000000fz002","step":4242,"links":[]}`, h0+60, h0+61, tid(4242)),
	},
	"topology": {
		fmt.Sprintf(`{"ts":%g,"engines":[{"addr":"http://fz-engine","worker_type":"regular","engine_rank":0,"gpus":[["fz-node",7]]}]}`, h0+5),
		fmt.Sprintf(`{"ts":%g,"engines":[{"addr":"http://fz-engine","worker_type":"regular","engine_rank":0,"gpus":[["fz-node",7]]}]}`, h0+6),
	},
	"engine_traces": {
		fmt.Sprintf(`{"trace":%q,"t":%g,"spans":[{"k":"req","t0":0,"t1":0.25,"span":"26b0f2f5c337080e","rid":"fz1"}]}`, tid(4241), h0+52),
		fmt.Sprintf(`{"trace":%q,"t":%g,"spans":[{"k":"req","t0":0,"t1":0.25,"span":"26b0f2f5c337080f","rid":"fz2"}]}`, tid(4242), h0+62),
	},
	"gpu_rollup": {
		fmt.Sprintf(`{"ts":%d,"dt":16,"node":"fz-node","gpu":7,"n":1,"util":[11,11,11,1]}`, int64(h0)+96),
		fmt.Sprintf(`{"ts":%d,"dt":16,"node":"fz-node","gpu":7,"n":1,"util":[12,12,12,1]}`, int64(h0)+192),
	},
}

// fzBase writes a run with one good record of every stream into dir.
func fzBase(tb testing.TB, dir string) {
	write(tb, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"fz","start_ts":`+fmt.Sprint(h0)+`}`)
	for s, good := range fzGood {
		write(tb, dir, "dashboard/"+s+"/"+fzHour+".jsonl", good[0]+"\n")
	}
}

// fzRun rewrites the stream's partition of the run in dir (fzBase) as good-before, the fuzzed block,
// good-after, each block on its own lines, and opens the run. Fuzzing reuses one directory per worker:
// creating a run per input made the file system, not the readers, the cost of an execution.
func fzRun(t *testing.T, dir, stream string, block []byte) *Store {
	good := fzGood[stream]
	write(t, dir, "dashboard/"+stream+"/"+fzHour+".jsonl", good[0]+"\n"+string(block)+"\n"+good[1]+"\n")
	st, err := Open(dir, false)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return st
}

// fzAsk asks every query the dashboard's API makes of a run.
func fzAsk(st *Store) {
	st.Meta()
	st.Info()
	st.Notices()
	st.Edge()
	w0, w1, _ := st.Window(nil, nil)
	lanes, _, _ := st.Lanes("all")
	for _, win := range [][2]float64{{h0, h0 + 3600}, {w0, w1}} {
		t0, t1 := win[0], win[1]
		if !(t1 > t0) || t1-t0 > WindowCap {
			continue
		}
		st.Phases(t0, t1, lanes)
		st.GPU(t0, t1, lanes, 50, []string{"util", "mem_mb", "power_w", "temp_c"})
		st.GPU(t0, t1, lanes, 4, []string{"util"}) // wide buckets: the roll-up and the pyramids
		st.Fleet(t0, t1, lanes, 8)
		st.Outliers(t0, t1, lanes, 3)
		for _, m := range []string{"util", "mem", "power", "phase"} {
			_, _ = st.Heatmap(t0, t1, lanes, m, 8)
		}
		st.Bubbles(t0, t1)
		st.LifecycleCarpet(t0, t1, 8, 10, 0)
		for _, m := range st.EngineMetrics() {
			_, _ = st.EngineSeries(m.Name, "", false, t0, t1, 10)
			_, _ = st.EngineSeries(m.Name, "", true, t0, t1, 10)
			for _, stat := range m.Stats {
				_, _ = st.EngineSeries(m.Name, stat, false, t0, t1, 10)
			}
			_, _ = st.EngineOverlay(m.Name, "", t0, t1, lanes, 10)
			st.EngineRawSeries(m.Name, t0, t1)
		}
	}
	keys, _, _ := st.MetricKeys()
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.Key)
	}
	st.MetricSeries(names, nil, nil, 20)
	st.StepMetricSeries(names...)
	st.StepMetricKeys()
	st.stepValues("rollout/step", 1)
	for _, s := range st.LifecycleSteps() {
		for _, sort := range []string{"submit", "staleness"} {
			_, _ = st.Anatomy(s.Step, sort, 0, 50)
		}
	}
	st.AllPhases()
}

// fzCheck says which good record of the fuzzed stream was lost (nil: none).
func fzCheck(st *Store, stream string) error {
	lanes, _, err := st.Lanes("all")
	if err != nil {
		return err
	}
	var lane []*Lane
	for _, l := range lanes {
		if l.Key == "fz-node:7" {
			lane = append(lane, l)
		}
	}
	switch stream {
	case "phases":
		names := st.Phases(h0, h0+3600, lane).Names
		for _, want := range []string{"fz_sentinel_before", "fz_sentinel_after"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("phase %s lost; phases read: %v", want, names)
			}
		}
	case "gpu_util", "gpu_rollup":
		if len(lane) != 1 {
			return fmt.Errorf("lane fz-node:7 lost: %d lanes", len(lanes))
		}
		pts := []int{3600, 50} // raw readings, and 72 s buckets the roll-up answers
		if stream == "gpu_rollup" {
			// gpu_util holds only the before-reading, so the after-reading is the roll-up's alone. A fuzzed record
			// of a coarser width coarsens the hour (rollBlock.coarsen): ask at a width the hour's roll-up answers.
			pts = pts[1:]
			if b := st.gpu.rollups[int64(h0/3600)]; b != nil && b.step > 72 {
				pts[0] = int(3600 / b.step)
			}
		}
		for _, points := range pts {
			r := st.GPU(h0, h0+3600, lane, points, []string{"util"})
			mm := r.Lanes[0].Fields["util"]
			for _, at := range []float64{h0 + 100, h0 + 200} {
				i := int((at - h0) / r.Step)
				if mm == nil || i >= len(mm.Max) || math.IsNaN(mm.Max[i]) {
					return fmt.Errorf("%d points: the reading at +%g s lost", points, at-h0)
				}
				if int(100/r.Step) == int(200/r.Step) && (mm.Min[i] != 11 || mm.Max[i] != 12) {
					return fmt.Errorf("%d points: one bucket holds both readings, min %v max %v, want 11 and 12", points, mm.Min[i], mm.Max[i])
				}
			}
		}
	case "metrics":
		names := st.MetricKeyNames()
		for _, want := range []string{"fz/sentinel_before", "fz/sentinel_after"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("metric %s lost; keys %v", want, names)
			}
		}
	case "engine_series":
		var names []string
		for _, m := range st.EngineMetrics() {
			names = append(names, m.Name)
		}
		for _, want := range []string{"fz:sentinel_before", "fz:sentinel_after"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("engine metric %s lost; metrics %v", want, names)
			}
		}
	case "trajectories":
		var steps []int
		for _, s := range st.LifecycleSteps() {
			steps = append(steps, s.Step)
		}
		for _, want := range []int{4241, 4242} {
			if !slices.Contains(steps, want) {
				return fmt.Errorf("step %d lost; steps %v", want, steps)
			}
		}
	}
	// topology and engine_traces: what they add is joined into other answers (engine lanes, anatomy stages),
	// where a fuzzed record may legitimately change it; answering at all is the check.
	return nil
}

func fuzzStream(f *testing.F, stream string) {
	f.Add([]byte(fzGood[stream][0]))
	f.Add([]byte("{\"partial\":"))
	f.Add([]byte{})
	dir := f.TempDir()
	fzBase(f, dir)
	f.Fuzz(func(t *testing.T, block []byte) {
		if len(block) > 64<<10 {
			return // the line-length bound has its own test; big inputs only slow the search
		}
		st := fzRun(t, dir, stream, block)
		fzAsk(st)
		if err := fzCheck(st, stream); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzPhasesFile(f *testing.F)       { fuzzStream(f, "phases") }
func FuzzTrajectoriesFile(f *testing.F) { fuzzStream(f, "trajectories") }
func FuzzGPUUtilFile(f *testing.F)      { fuzzStream(f, "gpu_util") }
func FuzzGPURollupFile(f *testing.F)    { fuzzStream(f, "gpu_rollup") }
func FuzzEngineSeriesFile(f *testing.F) { fuzzStream(f, "engine_series") }
func FuzzEngineTracesFile(f *testing.F) { fuzzStream(f, "engine_traces") }
func FuzzMetricsFile(f *testing.F)      { fuzzStream(f, "metrics") }
func FuzzTopologyFile(f *testing.F)     { fuzzStream(f, "topology") }

// FuzzCompressedPartition: a corrupt or hostile .zst beside the plain file of the same hour never hides the
// plain file's records, and never makes a query fail.
func FuzzCompressedPartition(f *testing.F) {
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd}) // a zstd magic and nothing else
	f.Add([]byte("not zstd"))
	dir := f.TempDir()
	fzBase(f, dir)
	for _, s := range []string{"phases", "gpu_util", "metrics", "trajectories"} {
		write(f, dir, "dashboard/"+s+"/"+fzHour+".jsonl", fzGood[s][0]+"\n"+fzGood[s][1]+"\n")
	}
	f.Fuzz(func(t *testing.T, zst []byte) {
		if len(zst) > 64<<10 {
			return
		}
		for _, s := range []string{"phases", "gpu_util", "metrics", "trajectories"} {
			if err := os.WriteFile(filepath.Join(dir, "dashboard", s, fzHour+".jsonl.zst"), zst, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st, err := Open(dir, false)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		fzAsk(st)
		for _, s := range []string{"phases", "gpu_util", "metrics", "trajectories"} {
			if err := fzCheck(st, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	})
}

// TestFuzzSentinelsRead: the fuzz check can fail: with the good records around the block it passes for every
// stream, and with a stream's after-record missing it says so.
func TestFuzzSentinelsRead(t *testing.T) {
	for s := range fzGood {
		dir := t.TempDir()
		fzBase(t, dir)
		if err := fzCheck(fzRun(t, dir, s, nil), s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	saved := fzGood
	defer func() { fzGood = saved }()
	for _, s := range []string{"phases", "gpu_util", "gpu_rollup", "metrics", "engine_series", "trajectories"} {
		fzGood = maps.Clone(saved)
		fzGood[s] = [2]string{saved[s][0], "{}"}
		dir := t.TempDir()
		fzBase(t, dir)
		if err := fzCheck(fzRun(t, dir, s, nil), s); err == nil {
			t.Errorf("%s: the after-record is missing and the check passed", s)
		}
	}
}
