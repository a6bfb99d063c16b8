package store

// Queries of the sglang engine series (docs/semconv.md §7, §8.3 engine_series; the hour blocks are in
// engines_block.go, packed once the hour is closed: engines_pack.go), with the read-side derivations of §7: dp
// ranks folded before differencing (sum, or mean for intensive gauges), counters → rates, histograms → mean
// (Δsum/Δcount) and quantiles from per-bucket Δcounts. A negative Δ (restart, reset) or Δcount ≤ 0 is a gap.

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// EngineRaw is one engine series (one engine, one label set including dp_rank) over a time range: cumulative
// as scraped. Slices may be shared with the store (an unpacked hour's columns): read-only.
type EngineRaw struct {
	Addr    string
	Metric  string
	Labels  map[string]string
	DP      string // dp_rank, "" when folded or absent
	Group   string // labels without dp_rank
	Hist    bool
	TS, V   []float64 // V = cumulative count for histograms
	Sum     []float64
	Bounds  []float64
	Buckets []float64 // stride len(Bounds)+1
}

// EngineRawSeries returns every series of metric with samples in [t0, t1] (±Inf for the whole run), hours
// concatenated in time order.
//
// Hours the memory budget dropped are read again from their files for the call (docs/operations.md "Memory"):
// the pin keeps them until the answer is built.
func (s *Store) EngineRawSeries(metric string, t0, t1 float64) []EngineRaw {
	defer s.pin()()
	s.ensureEngineHours(t0, t1)
	s.mu.Lock()
	s.ensureEngineHoursLocked(t0, t1)
	s.engines.allLoaded = s.engines.allLoaded || math.IsInf(t0, -1)
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.engines.rawLocked(metric, t0, t1)
}

func (r *engineReader) rawLocked(metric string, t0, t1 float64) []EngineRaw {
	return r.rawHoursLocked(metric, t0, t1, r.files.Hours())
}

// rawHoursLocked is rawLocked over the given hours' blocks only (time order).
func (r *engineReader) rawHoursLocked(metric string, t0, t1 float64, hours []int64) []EngineRaw {
	type part struct {
		ser    *engSeries
		i0, i1 int
		ts     []float64 // a packed series the range covers in part: its decoded timestamps
	}
	parts := map[string][]part{}
	var order []string
	for _, h := range hours {
		b := r.blocks[h]
		if b == nil {
			continue
		}
		for k, ser := range b.series {
			if ser.metric != metric {
				continue
			}
			p := part{ser: ser}
			ts := ser.ts
			if pk := ser.packed; pk != nil {
				if pk.t1 < t0 || pk.t0 > t1 {
					continue
				}
				if t0 <= pk.t0 && pk.t1 <= t1 {
					p.i1 = pk.n
				} else {
					p.ts = unpackColumn(make([]float64, 0, pk.n), pk.ts, pk.n)
					ts = p.ts
				}
			}
			if p.i1 == 0 {
				p.i0 = sort.SearchFloat64s(ts, t0)
				p.i1 = sort.Search(len(ts), func(i int) bool { return ts[i] > t1 })
				if p.i1 <= p.i0 {
					continue
				}
			}
			if _, ok := parts[k]; !ok {
				order = append(order, k)
			}
			parts[k] = append(parts[k], p)
		}
	}
	sort.Strings(order)
	out := make([]EngineRaw, 0, len(order))
	var tmp engRawTmp
	for _, k := range order {
		ps := parts[k]
		f := ps[0].ser
		r := EngineRaw{Addr: f.addr, Metric: f.metric, Labels: f.labels, DP: f.dp, Group: f.group, Hist: f.hist, Bounds: f.bounds}
		stride := len(f.bounds) + 1
		if len(ps) == 1 && ps[0].ser.packed == nil {
			p := ps[0]
			r.TS, r.V = p.ser.ts[p.i0:p.i1:p.i1], p.ser.v[p.i0:p.i1:p.i1]
			if f.hist {
				r.Sum, r.Buckets = p.ser.sum[p.i0:p.i1:p.i1], p.ser.buckets[p.i0*stride:p.i1*stride:p.i1*stride]
			}
		} else {
			n := 0 // size the output once
			for _, p := range ps {
				n += p.i1 - p.i0
			}
			r.TS, r.V = make([]float64, 0, n), make([]float64, 0, n)
			if f.hist {
				r.Sum, r.Buckets = make([]float64, 0, n), make([]float64, 0, n*stride)
			}
			for _, p := range ps {
				if p.ser.hist && len(p.ser.bounds) != len(f.bounds) {
					continue
				}
				if p.ser.packed != nil {
					tmp.appendPacked(&r, p.ser, p.i0, p.i1, p.ts)
					continue
				}
				r.TS = append(r.TS, p.ser.ts[p.i0:p.i1]...)
				r.V = append(r.V, p.ser.v[p.i0:p.i1]...)
				if f.hist {
					r.Sum = append(r.Sum, p.ser.sum[p.i0:p.i1]...)
					r.Buckets = append(r.Buckets, p.ser.buckets[p.i0*stride:p.i1*stride]...)
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// IntensiveEngineMetric is true of the gauges folded over dp ranks with the mean (docs/semconv.md §7): ratios (token_usage,
// cache_hit_rate, spec_accept_rate), per-request averages (spec_accept_length) and the per-transfer KV figures
// (latency, bootstrap and alloc times, speed) — a sum over ranks of any of them means nothing. All else is
// summed: counts, throughputs, token amounts (num_used_tokens, max_total_num_tokens: the engine's KV pool is
// the ranks' pools together, so token_usage = Σ used / Σ max). A histogram is always summed bucket by bucket
// (FoldEngines): sglang 0.5.23 exports the KV transfer figures as histograms, where the mean applies only to an
// engine that still exports them as gauges.
func IntensiveEngineMetric(metric string) bool {
	switch metric {
	case "sglang:token_usage", "sglang:cache_hit_rate", "sglang:spec_accept_rate", "sglang:spec_accept_length",
		"sglang:kv_transfer_latency_ms", "sglang:kv_transfer_bootstrap_ms", "sglang:kv_transfer_alloc_ms",
		"sglang:kv_transfer_speed_gb_s":
		return true
	}
	return false
}

// EngineKind is gauge, counter (name ends in _total: the record does not carry the type, §7) or histogram.
func EngineKind(metric string, hist bool) string {
	switch {
	case hist:
		return "histogram"
	case strings.HasSuffix(metric, "_total"):
		return "counter"
	}
	return "gauge"
}

// FoldEngines merges series that share key(r) at equal timestamps (all ranks of an engine share one scrape ts):
// values summed, or averaged over the members present when mean is set; histograms summed bucket by bucket when
// their bounds are equal (members with other bounds are left out). Series alone in their group pass unchanged.
func FoldEngines(raws []EngineRaw, key func(*EngineRaw) string, mean bool) []EngineRaw {
	groups := map[string][]int{}
	var order []string
	for i := range raws {
		k := key(&raws[i])
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	out := make([]EngineRaw, 0, len(order))
	for _, k := range order {
		idx := groups[k]
		first := raws[idx[0]]
		if len(idx) == 1 {
			if first.DP != "" {
				lab := make(map[string]string, len(first.Labels))
				for lk, lv := range first.Labels {
					if lk != "dp_rank" {
						lab[lk] = lv
					}
				}
				first.Labels, first.DP = lab, ""
			}
			out = append(out, first)
			continue
		}
		type ref struct {
			ts   float64
			m, i int
		}
		var all []ref
		for m, ri := range idx {
			r := &raws[ri]
			if r.Hist != first.Hist || (r.Hist && !equalFloats(r.Bounds, first.Bounds)) {
				continue
			}
			for i, t := range r.TS {
				all = append(all, ref{t, m, i})
			}
		}
		sort.Slice(all, func(a, b int) bool { return all[a].ts < all[b].ts })
		f := EngineRaw{Addr: first.Addr, Metric: first.Metric, Labels: map[string]string{}, Group: first.Group, Hist: first.Hist, Bounds: first.Bounds}
		for lk, lv := range first.Labels {
			if lk != "dp_rank" {
				f.Labels[lk] = lv
			}
		}
		stride := len(first.Bounds) + 1
		for j := 0; j < len(all); {
			t := all[j].ts
			var v, sum float64
			n := 0
			var bk []float64
			if f.Hist {
				bk = make([]float64, stride)
			}
			for ; j < len(all) && all[j].ts == t; j++ {
				r := &raws[idx[all[j].m]]
				i := all[j].i
				v += r.V[i]
				n++
				if f.Hist {
					sum += r.Sum[i]
					for q := range stride {
						bk[q] += r.Buckets[i*stride+q]
					}
				}
			}
			if mean && !f.Hist {
				v /= float64(n)
			}
			f.TS = append(f.TS, t)
			f.V = append(f.V, v)
			if f.Hist {
				f.Sum = append(f.Sum, sum)
				f.Buckets = append(f.Buckets, bk...)
			}
		}
		out = append(out, f)
	}
	return out
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ByEngineGroup folds dp ranks only (the default view); ByEngine folds every label (the lane overlay).
func ByEngineGroup(r *EngineRaw) string { return r.Addr + "\x00" + r.Group }
func ByEngine(r *EngineRaw) string      { return r.Addr }

// Derive turns one (folded) raw series into displayable points: gauge as is; counter → rate per second between
// adjacent scrapes; histogram → stat "mean" (Δsum/Δcount) or "pNN" (quantile of the per-bucket Δcounts, linear
// inside a bucket, the +Inf bucket clamped to the last bound). Gaps are NaN at the scrape that ends them.
func Derive(r *EngineRaw, stat string) (ts, v []float64) {
	kind := EngineKind(r.Metric, r.Hist)
	if kind == "gauge" {
		return r.TS, r.V
	}
	n := len(r.TS)
	if n < 2 {
		return nil, nil
	}
	ts = make([]float64, 0, n-1)
	v = make([]float64, 0, n-1)
	q := -1.0
	if kind == "histogram" && strings.HasPrefix(stat, "p") {
		_, _ = fmt.Sscanf(stat[1:], "%g", &q) // a "p" stat that does not parse keeps q < 0: the mean
		q /= 100
	}
	stride := len(r.Bounds) + 1
	delta := make([]float64, stride)
	for i := 1; i < n; i++ {
		dt := r.TS[i] - r.TS[i-1]
		dv := r.V[i] - r.V[i-1]
		val := math.NaN()
		switch {
		case kind == "counter":
			if dt > 0 && dv >= 0 {
				val = dv / dt
			}
		case q < 0: // histogram mean
			ds := r.Sum[i] - r.Sum[i-1]
			if dv > 0 && ds >= 0 {
				val = ds / dv
			}
		default:
			if dv > 0 {
				ok := true
				for b := range stride {
					delta[b] = r.Buckets[i*stride+b] - r.Buckets[(i-1)*stride+b]
					if delta[b] < 0 {
						ok = false
					}
				}
				if ok {
					val = bucketQuantile(r.Bounds, delta, q)
				}
			}
		}
		ts = append(ts, r.TS[i])
		v = append(v, val)
	}
	return ts, v
}

// bucketQuantile: quantile q of a histogram given per-bucket counts (len(bounds)+1, the last one +Inf).
func bucketQuantile(bounds, counts []float64, q float64) float64 {
	total := 0.0
	for _, c := range counts {
		total += c
	}
	if total <= 0 || len(bounds) == 0 {
		return math.NaN()
	}
	target := q * total
	cum := 0.0
	for b, c := range counts {
		if c > 0 && cum+c >= target {
			if b >= len(bounds) {
				return bounds[len(bounds)-1]
			}
			lo := 0.0
			if b > 0 {
				lo = bounds[b-1]
			}
			hi := bounds[b]
			return lo + (hi-lo)*(target-cum)/c
		}
		cum += c
	}
	return bounds[len(bounds)-1]
}

// EngineStats lists the stats a metric can be shown as.
func EngineStats(kind string) []string {
	if kind == "histogram" {
		return []string{"mean", "p50", "p99"}
	}
	return nil
}

// EngineMetricInfo is one engine metric of the catalog.
type EngineMetricInfo struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"` // gauge | rate | histogram
	Stats  []string `json:"stats,omitempty"`
	Points int      `json:"points"`
}

// catalogLocked counts the loaded hours' series and the kept figures of the hours the budget dropped.
func (r *engineReader) catalogLocked() []EngineMetricInfo {
	m := map[string]*EngineMetricInfo{}
	add := func(metric string, hist bool, points int) {
		e := m[metric]
		if e == nil {
			kind := EngineKind(metric, hist)
			e = &EngineMetricInfo{Name: metric, Kind: kind, Stats: EngineStats(kind)}
			if kind == "counter" {
				e.Kind = "rate"
			}
			m[metric] = e
		}
		e.Points += points
	}
	for _, b := range r.blocks {
		for _, ser := range b.series {
			add(ser.metric, ser.hist, ser.packedLen())
		}
	}
	for _, c := range r.dropped {
		for metric, e := range c.metrics {
			add(metric, e.hist, e.points)
		}
	}
	out := make([]EngineMetricInfo, 0, len(m))
	for _, e := range m {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// EngineMetrics is the engine metric catalog (every hour loaded).
func (s *Store) EngineMetrics() []EngineMetricInfo {
	s.loadEngineCatalog()
	s.mu.Lock()
	s.ensureEngineCatalogLocked()
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.engines.catalogLocked()
}

// displayKind is what a derived series is: gauge, rate, mean or pNN.
func displayKind(metric string, hist bool, stat string) (string, error) {
	switch EngineKind(metric, hist) {
	case "counter":
		return "rate", nil
	case "histogram":
		if stat == "" {
			stat = "mean"
		}
		if stat == "mean" {
			return "mean", nil
		}
		var q float64
		if _, err := fmt.Sscanf(stat, "p%g", &q); err != nil || q <= 0 || q >= 100 {
			return "", fmt.Errorf("stat %q: want mean or pNN (0 < NN < 100)", stat)
		}
		return stat, nil
	}
	return "gauge", nil
}

// EngineLine is one line of an engine chart: min/max per bucket on the result's time base.
type EngineLine struct {
	Engine string            `json:"engine"`
	DP     *string           `json:"dp"`
	Labels map[string]string `json:"labels"`
	Label  string            `json:"label"`
	Min    Floats            `json:"min"`
	Max    Floats            `json:"max"`
	N      int               `json:"n"` // derived points in the window (before bucketing)
}

// EngineSeriesResult is the engine chart of one metric.
type EngineSeriesResult struct {
	Metric string       `json:"metric"`
	Kind   string       `json:"kind"`
	T0     float64      `json:"t0"`
	T1     float64      `json:"t1"`
	Step   float64      `json:"step_s"`
	T      []float64    `json:"t"`
	Series []EngineLine `json:"series"`
}

// EngineSeries returns one line per engine (dp ranks folded) or per engine × dp rank, bucketed min/max.
func (s *Store) EngineSeries(metric, stat string, perDP bool, t0, t1 float64, points int) (*EngineSeriesResult, error) {
	// One scrape before the window so the first interval of a rate or mean is not lost.
	raws := s.EngineRawSeries(metric, t0-120, t1)
	res := &EngineSeriesResult{
		Metric: metric, Kind: "gauge", T0: t0, T1: t1, Step: (t1 - t0) / float64(points),
		T: make([]float64, points), Series: []EngineLine{},
	}
	for i := range res.T {
		res.T[i] = t0 + float64(i)*res.Step
	}
	if len(raws) == 0 {
		if _, err := displayKind(metric, false, stat); err != nil {
			return nil, err
		}
		return res, nil
	}
	kind, err := displayKind(metric, raws[0].Hist, stat)
	if err != nil {
		return nil, err
	}
	res.Kind = kind
	if !perDP {
		raws = FoldEngines(raws, ByEngineGroup, IntensiveEngineMetric(metric))
	}
	groups := map[string]map[string]bool{} // label sets (without dp_rank) per engine
	for i := range raws {
		if groups[raws[i].Addr] == nil {
			groups[raws[i].Addr] = map[string]bool{}
		}
		groups[raws[i].Addr][raws[i].Group] = true
	}
	for i := range raws {
		r := &raws[i]
		ts, v := Derive(r, kind)
		line := EngineLine{Engine: r.Addr, Labels: r.Labels, Label: r.Addr, Min: nanSlice(points), Max: nanSlice(points)}
		if line.Labels == nil {
			line.Labels = map[string]string{}
		}
		if r.DP != "" {
			dp := r.DP
			line.DP = &dp
			line.Label += " dp" + dp
		}
		if r.Group != "" && len(groups[r.Addr]) > 1 {
			line.Label += " {" + r.Group + "}" // several label sets on one engine (PD engine types, stages)
		}
		for j, t := range ts {
			if t < t0 || t > t1 || v[j] != v[j] {
				continue
			}
			b := min(int((t-t0)/res.Step), points-1)
			line.N++
			if mn := line.Min[b]; mn != mn || v[j] < mn {
				line.Min[b] = v[j]
			}
			if mx := line.Max[b]; mx != mx || v[j] > mx {
				line.Max[b] = v[j]
			}
		}
		res.Series = append(res.Series, line)
	}
	sort.SliceStable(res.Series, func(i, j int) bool { return res.Series[i].Label < res.Series[j].Label })
	return res, nil
}

// NormAddr is an engine address as readers compare it (docs/semconv.md §7): no scheme, no trailing slash.
func NormAddr(a string) string {
	if i := strings.Index(a, "://"); i >= 0 {
		a = a[i+3:]
	}
	return strings.TrimRight(a, "/")
}

func addrHost(a string) string {
	a = NormAddr(a)
	if i := strings.LastIndexByte(a, ':'); i > 0 {
		return a[:i]
	}
	return a
}

// OverlaySegment is one engine's values on one lane (NaN outside the topology windows it covered the lane).
type OverlaySegment struct {
	Engine string `json:"engine"`
	V      Floats `json:"v"`
}

// OverlayLane is one GPU lane's engine overlay.
type OverlayLane struct {
	ID       string           `json:"id"`
	Segments []OverlaySegment `json:"segments"`
}

// EngineOverlayResult is the /engines response: an engine metric drawn on the GPU lanes its engine occupied.
type EngineOverlayResult struct {
	Metric string        `json:"metric"`
	Kind   string        `json:"kind"`
	T0     float64       `json:"t0"`
	T1     float64       `json:"t1"`
	Step   float64       `json:"step_s"`
	T      []float64     `json:"t"`
	Lanes  []OverlayLane `json:"lanes"`
}

// EngineOverlay folds every label of each engine (dp ranks, engine types), derives the metric, takes the bucket
// maximum, and puts each engine on the lanes of its topology windows (a snapshot is valid until the next one;
// an engine restarted on a new port is a new segment). Engines no snapshot lists are drawn on every lane of their
// address's host.
func (s *Store) EngineOverlay(metric, stat string, t0, t1 float64, sel []*Lane, points int) (*EngineOverlayResult, error) {
	raws := s.EngineRawSeries(metric, t0-120, t1)
	res := &EngineOverlayResult{
		Metric: metric, Kind: "gauge", T0: t0, T1: t1, Step: (t1 - t0) / float64(points),
		T: make([]float64, points), Lanes: []OverlayLane{},
	}
	for i := range res.T {
		res.T[i] = t0 + float64(i)*res.Step
	}
	hist := len(raws) > 0 && raws[0].Hist
	kind, err := displayKind(metric, hist, stat)
	if err != nil {
		return nil, err
	}
	res.Kind = kind
	raws = FoldEngines(raws, ByEngine, IntensiveEngineMetric(metric))
	byAddr := map[string]Floats{}
	names := map[string]string{}
	for i := range raws {
		ts, v := Derive(&raws[i], kind)
		col := Floats(nanSlice(points))
		for j, t := range ts {
			if t < t0 || t > t1 || v[j] != v[j] {
				continue
			}
			b := min(int((t-t0)/res.Step), points-1)
			if cur := col[b]; cur != cur || v[j] > cur {
				col[b] = v[j]
			}
		}
		n := NormAddr(raws[i].Addr)
		byAddr[n] = col
		names[n] = raws[i].Addr
	}
	s.mu.RLock()
	type win struct {
		t0, t1 float64
		lanes  map[string][]string // lane key → engine addrs (normalised)
	}
	var wins []win
	inTopo := map[string]bool{}
	ids := s.lanes.set.ids // topology lanes named as the lanes are (nodeIdentity: miles names nodes by IP)
	for i, snap := range s.topology.snapshots {
		w := win{t0: snap.TS, t1: math.Inf(1), lanes: map[string][]string{}}
		if i+1 < len(s.topology.snapshots) {
			w.t1 = s.topology.snapshots[i+1].TS
		}
		for _, e := range snap.Engines {
			a := NormAddr(e.Addr)
			inTopo[a] = true
			for gi, g := range e.GPUs {
				if key, ok := topoLaneKey(g); ok {
					uuid := ""
					if gi < len(e.GPUUUIDs) && e.GPUUUIDs[gi] != nil {
						uuid = *e.GPUUUIDs[gi]
					}
					key = ids.key(key, uuid)
					w.lanes[key] = append(w.lanes[key], a)
				}
			}
		}
		wins = append(wins, w)
	}
	s.mu.RUnlock()
	for _, l := range sel {
		ol := OverlayLane{ID: l.ID, Segments: []OverlaySegment{}}
		segs := map[string]Floats{}
		var order []string
		put := func(a string, from, to float64) {
			col, ok := byAddr[a]
			if !ok {
				return
			}
			seg := segs[a]
			if seg == nil {
				seg = nanSlice(points)
				segs[a] = seg
				order = append(order, a)
			}
			for b := range seg {
				bt := t0 + (float64(b)+0.5)*res.Step
				if bt >= from && bt < to {
					seg[b] = col[b]
				}
			}
		}
		for _, w := range wins {
			if w.t1 < t0 || w.t0 > t1 {
				continue
			}
			for _, a := range w.lanes[l.Key] {
				put(a, w.t0, w.t1)
			}
		}
		for a := range byAddr {
			if !inTopo[a] && ids.node(addrHost(a)) == l.Node {
				put(a, math.Inf(-1), math.Inf(1))
			}
		}
		sort.Strings(order)
		for _, a := range order {
			ol.Segments = append(ol.Segments, OverlaySegment{Engine: names[a], V: segs[a]})
		}
		res.Lanes = append(res.Lanes, ol)
	}
	return res, nil
}

// DataVersion changes whenever anything a view or the advisory reads may have changed.
func (s *Store) DataVersion() [6]uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return [6]uint64{
		math.Float64bits(s.edge), s.metrics.index.base + uint64(len(s.metrics.index.log)), s.trajectories.index.version,
		s.trajectories.version, s.engines.version, s.metaVer,
	}
}
