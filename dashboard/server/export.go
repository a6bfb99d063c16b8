package server

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// GET /api/v1/export/perfetto: the Compute view's window as a Perfetto trace (docs/dashboard-api.md "Perfetto
// export"): a track per GPU lane (grouped by node) with its phases, nesting kept; under each lane counter
// tracks of util, memory and power, and of the engine overlay; the window's sample trajectories as their own
// tracks; the steps as instants.

// exportEngineMetrics are the engine series drawn as counters under the lanes they ran on.
var exportEngineMetrics = []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput"}

// exportMaxEvents bounds one export (about 30 bytes an event: ~60 MB); a bigger window is refused, saying so.
const exportMaxEvents = 2_000_000

// exportMaxSamples bounds the trajectory tracks of one export: those of the window's newest steps are kept, and
// the trace says it capped (docs/dashboard-api.md "Perfetto export").
const exportMaxSamples = 1024

// perfettoFile is the downloaded trace.
type perfettoFile struct {
	name string
	data []byte
	w    *traceWriter
	traj trajectoryCap
}

func (f perfettoFile) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+f.name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Miles-Trace-Tracks", strconv.Itoa(f.w.tracks))
	w.Header().Set("X-Miles-Trace-Slices", strconv.Itoa(f.w.events[eventSliceBegin]))
	w.Header().Set("X-Miles-Trace-Counters", strconv.Itoa(f.w.events[eventCounter]))
	w.Header().Set("X-Miles-Trace-Instants", strconv.Itoa(f.w.events[eventInstant]))
	w.Header().Set("X-Miles-Trace-Samples", strconv.Itoa(f.traj.Kept))
	w.Header().Set("X-Miles-Trace-Samples-Window", strconv.Itoa(f.traj.Window))
	if f.traj.Capped {
		w.Header().Set("X-Miles-Trace-Capped", f.traj.summary())
	}
	_, _ = w.Write(f.data)
}

// slice is one span to draw on a track.
type slice struct {
	t0, t1   float64
	name     string
	category string
	ann      []annotation
}

// exportPerfetto builds the trace.
func (s *Server) exportPerfetto(r *http.Request) (any, error) {
	t0, t1, sel, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	points, err := intParam(r, "points", 1000, 2, 4000)
	if err != nil {
		return nil, err
	}
	meta := s.run.Meta()
	phases := s.compute.Phases(t0, t1, sel)
	var fields []string
	for _, f := range []string{"util", "mem_mb", "power_w"} {
		if slices.Contains(meta.Capabilities.GPUFields, f) {
			fields = append(fields, f)
		}
	}
	var gpu *store.GPUResult
	if len(fields) > 0 && meta.Capabilities.GPUUtil {
		gpu = s.compute.GPU(t0, t1, sel, points, fields)
	}
	var overlays []*store.EngineOverlayResult
	if meta.Capabilities.EngineSeries {
		for _, m := range exportEngineMetrics {
			if o, err := s.engines.EngineOverlay(m, "", t0, t1, sel, points); err == nil {
				overlays = append(overlays, o)
			}
		}
	}
	samples, tcap := s.windowSamples(t0, t1)
	steps := s.compute.Bubbles(t0, t1)

	// The size, before anything is encoded.
	events := len(steps) + len(phases.Lanes)
	for _, l := range phases.Lanes {
		events += 2 * len(l.T0)
	}
	if gpu != nil {
		events += len(gpu.Lanes) * len(fields) * len(gpu.T)
	}
	for _, o := range overlays {
		for _, l := range o.Lanes {
			events += len(l.Segments) * len(o.T)
		}
	}
	for _, sm := range samples {
		events += 2 * len(sm.slices)
	}
	if limit := cmp.Or(s.exportMax, exportMaxEvents); events > limit {
		return nil, badData(fmt.Errorf("this window holds about %d trace events, over the export's limit of %d: narrow the window or the lanes (or lower points=, now %d)",
			events, limit, points))
	}

	w := newTraceWriter()
	w.metadata(tcap.metadata())
	var next uint64
	uuid := func() uint64 { next++; return next }
	// Lanes, grouped by node, in lane order.
	lanes, _, err := s.run.Lanes(r.URL.Query().Get("lanes"))
	if err != nil {
		return nil, badData(err)
	}
	nodeTrack := map[string]uint64{}
	laneTrack := map[string]uint64{}
	for i, l := range lanes {
		nt, ok := nodeTrack[l.Node]
		if !ok {
			nt = uuid()
			nodeTrack[l.Node] = nt
			w.track(trackSpec{uuid: nt, name: "node " + l.Node, rank: len(nodeTrack), explicit: true})
		}
		lt := uuid()
		laneTrack[l.ID] = lt
		w.track(trackSpec{uuid: lt, parent: nt, name: laneName(l), rank: i, explicit: true})
	}
	// Phases on their lanes.
	for _, pl := range phases.Lanes {
		lt, ok := laneTrack[pl.ID]
		if !ok {
			continue
		}
		sl := make([]slice, len(pl.T0))
		for i := range pl.T0 {
			ann := []annotation{intAnn("step", pl.Step[i]), intAnn("rank", pl.Rank[i])}
			if pl.Open[i] {
				ann = append(ann, annotation{name: "open", s: "still running at the data edge"})
			}
			sl[i] = slice{t0: pl.T0[i], t1: pl.T1[i], name: phases.Names[pl.Name[i]], category: "phase", ann: ann}
		}
		emitNested(w, uuid, lt, "phases", sl)
	}
	// Counters under their lanes.
	counterRank := 1 << 20 // after the lanes' overflow tracks
	if gpu != nil {
		for _, gl := range gpu.Lanes {
			lt, ok := laneTrack[gl.ID]
			if !ok {
				continue
			}
			for fi, f := range fields {
				mm := gl.Fields[f]
				if mm == nil {
					continue
				}
				ct := uuid()
				w.track(trackSpec{uuid: ct, parent: lt, name: f, rank: counterRank + fi, counterUnit: fieldUnit(f)})
				for i, v := range mm.Max {
					if i < len(gpu.T) && !math.IsNaN(v) {
						w.event(eventCounter, ct, gpu.T[i], "", "", v, nil)
					}
				}
			}
		}
	}
	for oi, o := range overlays {
		for _, ol := range o.Lanes {
			lt, ok := laneTrack[ol.ID]
			if !ok {
				continue
			}
			for si, seg := range ol.Segments {
				ct := uuid()
				w.track(trackSpec{uuid: ct, parent: lt, name: o.Metric + " · " + seg.Engine, rank: counterRank + 100 + oi*16 + si, counterUnit: "count"})
				for i, v := range seg.V {
					if i < len(o.T) && !math.IsNaN(v) {
						w.event(eventCounter, ct, o.T[i], "", "", v, nil)
					}
				}
			}
		}
	}
	// Trajectories, one track per sample attempt.
	if len(samples) > 0 {
		root := uuid()
		name := "trajectories"
		if tcap.Capped {
			name += " · " + tcap.summary()
		}
		w.track(trackSpec{uuid: root, name: name, rank: len(nodeTrack) + 1, explicit: true})
		for i, sm := range samples {
			t := uuid()
			w.track(trackSpec{uuid: t, parent: root, name: sm.name, rank: i, explicit: true})
			emitNested(w, uuid, t, "segments", sm.slices)
		}
	}
	// Steps as instants: the trainer's step records (as /bubbles gives them), else where each step's first phase
	// of the window starts.
	if len(steps) == 0 {
		steps = phaseSteps(phases)
	}
	if len(steps) > 0 {
		st := uuid()
		w.track(trackSpec{uuid: st, name: "steps", rank: 0})
		for _, b := range steps {
			w.event(eventInstant, st, b.T0, "step "+strconv.Itoa(b.Step), "step", 0,
				[]annotation{floatAnn("wait_ratio", b.WaitRatio), floatAnn("step_time_s", b.T1-b.T0)})
		}
	}
	name := cmp.Or(meta.RunName, "run")
	return perfettoFile{
		name: fmt.Sprintf("%s-%d-%d.perfetto-trace", fileSafe(name), int64(t0), int64(t1)), data: w.buf, w: w, traj: tcap,
	}, nil
}

// phaseSteps are the steps of the window's phases, each starting at its first phase.
func phaseSteps(p *store.PhasesResult) []store.Bubble {
	first := map[int]float64{}
	for _, l := range p.Lanes {
		for i, st := range l.Step {
			if st < 0 {
				continue
			}
			if v, ok := first[st]; !ok || l.T0[i] < v {
				first[st] = l.T0[i]
			}
		}
	}
	out := make([]store.Bubble, 0, len(first))
	for st, t := range first {
		out = append(out, store.Bubble{Step: st, T0: t, T1: t})
	}
	slices.SortFunc(out, func(a, b store.Bubble) int { return cmp.Compare(a.Step, b.Step) })
	return out
}

// laneName is a lane's track name: its id as the Compute view labels it (g<i>), then its key, rank and roles.
func laneName(l *store.Lane) string {
	n := l.ID + " · " + l.Key
	if len(l.Ranks) > 0 {
		n += fmt.Sprintf(" · rank %d", l.Ranks[0])
	}
	if len(l.Roles) > 0 {
		n += " · " + strings.Join(l.Roles, "+")
	}
	return n
}

func fieldUnit(f string) string {
	switch f {
	case "util":
		return "%"
	case "mem_mb":
		return "MiB"
	case "power_w":
		return "W"
	}
	return ""
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

func intAnn(name string, v int) annotation {
	i := int64(v)
	return annotation{name: name, i: &i}
}

func floatAnn(name string, v float64) annotation { return annotation{name: name, f: &v} }

// emitNested draws slices on track, nesting kept: a slice that starts inside another and ends after it (which
// a track's slices may not) goes on an overlap track under it, as many as needed.
func emitNested(w *traceWriter, uuid func() uint64, track uint64, what string, sl []slice) {
	slices.SortStableFunc(sl, func(a, b slice) int {
		if c := cmp.Compare(a.t0, b.t0); c != 0 {
			return c
		}
		return cmp.Compare(b.t1, a.t1) // the outer first
	})
	levels := [][]slice{}
	ends := [][]float64{} // per level, the ends of the slices open on it
	for _, s := range sl {
		if s.t1 < s.t0 {
			s.t1 = s.t0
		}
		placed := false
		for li := range levels {
			st := ends[li]
			for len(st) > 0 && st[len(st)-1] <= s.t0 {
				st = st[:len(st)-1]
			}
			if len(st) == 0 || s.t1 <= st[len(st)-1] {
				ends[li] = append(st, s.t1)
				levels[li] = append(levels[li], s)
				placed = true
				break
			}
			ends[li] = st
		}
		if !placed {
			levels = append(levels, []slice{s})
			ends = append(ends, []float64{s.t1})
		}
	}
	for li, lv := range levels {
		t := track
		if li > 0 {
			t = uuid()
			w.track(trackSpec{uuid: t, parent: track, name: fmt.Sprintf("%s (overlap %d)", what, li), rank: li})
		}
		// Begin in order; before each begin, end the open slices that ended by then (innermost first).
		var open []slice
		for _, s := range lv {
			for len(open) > 0 && open[len(open)-1].t1 <= s.t0 {
				w.event(eventSliceEnd, t, open[len(open)-1].t1, "", "", 0, nil)
				open = open[:len(open)-1]
			}
			w.event(eventSliceBegin, t, s.t0, s.name, s.category, 0, s.ann)
			open = append(open, s)
		}
		for len(open) > 0 {
			w.event(eventSliceEnd, t, open[len(open)-1].t1, "", "", 0, nil)
			open = open[:len(open)-1]
		}
	}
}

// windowSample is one sample attempt's segments in the window.
type windowSample struct {
	name   string
	slices []slice
}

// trajectoryCap is what an export kept of the window's sample trajectories.
type trajectoryCap struct {
	// Kept is the samples exported, Window those of the window's steps (more when Capped).
	Kept, Window int
	Capped       bool
	// FirstStep and LastStep are the oldest and newest step exported (-1: none).
	FirstStep, LastStep int
	// Limit is the most samples one export holds.
	Limit int
}

func (c trajectoryCap) summary() string {
	return fmt.Sprintf("newest %d of %d samples (steps %d-%d; an export holds at most %d)", c.Kept, c.Window, c.FirstStep, c.LastStep, c.Limit)
}

// metadata is the trace metadata that says what was kept of the window's trajectories.
func (c trajectoryCap) metadata() []annotation {
	return []annotation{
		intAnn("miles_trajectories_exported", c.Kept), intAnn("miles_trajectories_in_window", c.Window),
		intAnn("miles_trajectories_capped", map[bool]int{false: 0, true: 1}[c.Capped]),
		intAnn("miles_trajectories_first_step", c.FirstStep), intAnn("miles_trajectories_last_step", c.LastStep),
		intAnn("miles_trajectories_limit", c.Limit),
	}
}

// windowSamples are the samples consumed by the steps whose anatomy reaches into [t0, t1], each with its
// attempts (outer) and queue, generate and tool segments, oldest step first: at most the server's
// exportMaxSamples, those of the newest steps (a window is read from its live edge back). A step the cap cuts
// keeps its first rows; the steps before it are counted, not read (their consumed samples).
func (s *Server) windowSamples(t0, t1 float64) ([]windowSample, trajectoryCap) {
	steps, ok := s.traj.LifecycleStepsIfIndexed()
	if !ok {
		steps = s.traj.LifecycleSteps()
	}
	limit := cmp.Or(s.exportMaxSamples, exportMaxSamples)
	c := trajectoryCap{FirstStep: -1, LastStep: -1, Limit: limit}
	var byStep [][]windowSample // newest step first
	for _, st := range slices.Backward(steps) {
		if st.T < t0 {
			continue
		}
		if c.Kept >= limit {
			if st.T <= t1 {
				c.Window += st.Samples
			} else if a, err := s.traj.Anatomy(st.Step, "submit", 0, 0); err == nil && a.T0 <= t1 {
				c.Window += st.Samples
			}
			c.Capped = c.Capped || st.Samples > 0
			continue
		}
		a, err := s.traj.Anatomy(st.Step, "submit", 0, 0)
		if err != nil || a.T0 > t1 {
			continue
		}
		var out []windowSample
		for _, row := range a.Rows {
			if row.End < t0 || row.Submit > t1 {
				continue
			}
			if c.Kept >= limit {
				c.Window++
				c.Capped = true
				continue
			}
			ws := windowSample{name: fmt.Sprintf("step %d · sample %d", st.Step, row.Sample)}
			for i := 0; i+1 < len(row.Attempts); i += 2 {
				status := ""
				if i/2 < len(row.AttemptStatus) {
					status = row.AttemptStatus[i/2]
				}
				ws.slices = append(ws.slices, slice{
					t0: row.Attempts[i], t1: row.Attempts[i+1], name: "attempt", category: "trajectory",
					ann: []annotation{{name: "status", s: status}},
				})
			}
			for i := 0; i+1 < len(row.Queue); i += 2 {
				ws.slices = append(ws.slices, slice{t0: row.Queue[i], t1: row.Queue[i+1], name: "queue", category: "trajectory"})
			}
			for i := 0; i+4 < len(row.Gen); i += 5 {
				ann := []annotation{intAnn("turn", int(row.Gen[i+3]))}
				if wv := row.Gen[i+2]; !math.IsNaN(wv) {
					ann = append(ann, intAnn("weight_version", int(wv)))
				}
				ws.slices = append(ws.slices, slice{t0: row.Gen[i], t1: row.Gen[i+1], name: "generate", category: "trajectory", ann: ann})
			}
			for i := 0; i+2 < len(row.Tool); i += 3 {
				ws.slices = append(ws.slices, slice{
					t0: row.Tool[i], t1: row.Tool[i+1], name: "tool", category: "trajectory",
					ann: []annotation{intAnn("tool_calls", int(row.Tool[i+2]))},
				})
			}
			if len(ws.slices) > 0 {
				out = append(out, ws)
				c.Kept++
				c.Window++
			}
		}
		if len(out) > 0 {
			byStep = append(byStep, out)
			c.FirstStep = st.Step
			if c.LastStep < 0 {
				c.LastStep = st.Step
			}
		}
	}
	var all []windowSample
	for _, out := range slices.Backward(byStep) {
		all = append(all, out...)
	}
	return all, c
}
