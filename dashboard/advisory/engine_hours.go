package advisory

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The engine rules' statistics are kept hour by hour (docs/dashboard-api.md "GET /api/v1/advisory", "Engine
// statistics by hour"): each engine hour is reduced once to a digest — per series its time-weighted sums, its
// counter increases and its first and last samples; per engine its peak concurrency and its latency by bin — and
// the rules combine the digests, adding across each hour boundary what the two hours' edge samples give. A closed
// hour's digest is all the advisory needs of it, so the store keeps the digest and may drop the hour's points
// (docs/operations.md "Memory"). A window that cuts an hour digests that hour again over the window alone.

// EngineHours is the engine metrics the rules read, one digest per hour in time order.
type EngineHours struct {
	Hours []EngineHour
	// Part digests hour i over [lo, hi] only (an hour a window cuts); nil when Hours came with their points
	// (EngineHoursOf), whose Part is built in.
	Part func(i int, lo, hi float64) EngineHour

	parts map[partKey]EngineHour
}

type partKey struct {
	i      int
	lo, hi float64
}

// EngineHour is one hour's digest (DigestEngineHour).
type EngineHour struct {
	Hour int64 // the store's hour key (Unix hour; the hour of the first scrape for a digest made from points)
	// T0 and T1 are the first and last scrape times of the hour (any metric read); T1 < T0 when it has none.
	T0, T1  float64
	Metrics map[string]*MetricHour
}

// MetricHour is one metric's part of an engine hour.
type MetricHour struct {
	// Series by series key (engine, label set, dp rank).
	Series map[string]*SeriesHour
	// Peaks is, per engine, the highest value of all its series summed at one scrape (gauges only).
	Peaks map[string]float64
	// Folds is, per engine, its histograms' counts and sums summed at each scrape (histograms only).
	Folds map[string]*FoldHour
}

// SeriesHour is one series in one hour. The first and last samples are the hour's, whatever the range; the
// sums cover the samples in the range the digest was made over.
type SeriesHour struct {
	Addr, Group, DP string
	N               int // samples in range
	FirstTS, FirstV float64
	LastTS, LastV   float64
	FirstIn, LastIn bool // the hour's first (last) sample lies in range
	// Med is the median scrape interval within the hour (0 with fewer than two samples): a sample holds until the
	// next, at most gapHold(Med).
	Med float64
	// Num and Den are Σ v·dt and Σ dt over the samples in range, the hour's last sample excepted (its interval
	// ends in the next hour: the combination adds it).
	Num, Den float64
	// Rise is the sum of the positive scrape-to-scrape increases that end in range within the hour.
	Rise float64
}

// FoldHour is one engine's latency histograms in one hour, its series summed at each scrape (store.FoldEngines
// by engine): the first and last folded scrapes, and the increases within the hour by bin of the later scrape.
type FoldHour struct {
	FirstTS, FirstC, FirstS float64
	LastTS, LastC, LastS    float64
	// Bins holds Δsum and Δcount per bin (floor(ts / bin width)).
	Bins map[int64][2]float64
}

// seriesKey names a series across hours.
func seriesKey(r *store.EngineRaw) string { return r.Addr + "\x00" + r.Group + "\x00" + r.DP }

// DigestEngineHour reduces one hour's series (by metric, as the store holds them for that hour) over [lo, hi];
// binS is the straggler rule's bin width (the latency folds, made only over the whole hour).
func DigestEngineHour(hour int64, raws map[string][]store.EngineRaw, lo, hi, binS float64) EngineHour {
	eh := EngineHour{Hour: hour, T0: math.Inf(1), T1: math.Inf(-1), Metrics: make(map[string]*MetricHour, len(raws))}
	whole := math.IsInf(lo, -1) && math.IsInf(hi, 1)
	for _, m := range slices.Sorted(maps.Keys(raws)) {
		rs := raws[m]
		if len(rs) == 0 {
			continue
		}
		mh := &MetricHour{Series: make(map[string]*SeriesHour, len(rs))}
		eh.Metrics[m] = mh
		for i := range rs {
			r := &rs[i]
			if n := len(r.TS); n > 0 {
				eh.T0, eh.T1 = math.Min(eh.T0, r.TS[0]), math.Max(eh.T1, r.TS[n-1])
				mh.Series[seriesKey(r)] = digestSeries(r, lo, hi)
			}
		}
		hist := rs[0].Hist
		if !hist {
			mh.Peaks = map[string]float64{}
			for _, f := range store.FoldEngines(rs, store.ByEngine, false) {
				for k, t := range f.TS {
					if t >= lo && t <= hi && f.V[k] == f.V[k] {
						if p, ok := mh.Peaks[f.Addr]; !ok || f.V[k] > p {
							mh.Peaks[f.Addr] = f.V[k]
						}
					}
				}
			}
		} else if whole {
			mh.Folds = map[string]*FoldHour{}
			for _, f := range store.FoldEngines(rs, store.ByEngine, false) {
				if n := len(f.TS); n > 0 {
					mh.Folds[f.Addr] = digestFold(&f, binS)
				}
			}
		}
	}
	return eh
}

func digestSeries(r *store.EngineRaw, lo, hi float64) *SeriesHour {
	ts, v := r.TS, r.V
	n := len(ts)
	sh := &SeriesHour{
		Addr: r.Addr, Group: r.Group, DP: r.DP,
		FirstTS: ts[0], FirstV: v[0], LastTS: ts[n-1], LastV: v[n-1],
		FirstIn: ts[0] >= lo && ts[0] <= hi, LastIn: ts[n-1] >= lo && ts[n-1] <= hi,
		Med: medianInterval(ts),
	}
	hold := gapHold(sh.Med)
	i0 := sort.SearchFloat64s(ts, lo)
	i1 := sort.Search(n, func(k int) bool { return ts[k] > hi })
	sh.N = max(0, i1-i0)
	for k := i0; k < i1; k++ {
		if k > 0 {
			if d := v[k] - v[k-1]; d > 0 {
				sh.Rise += d
			}
		}
		if k+1 == n {
			break
		}
		dt := math.Min(ts[k+1]-ts[k], hold)
		if dt <= 0 || v[k] != v[k] {
			continue
		}
		sh.Num += v[k] * dt
		sh.Den += dt
	}
	return sh
}

func digestFold(f *store.EngineRaw, binS float64) *FoldHour {
	n := len(f.TS)
	fh := &FoldHour{
		FirstTS: f.TS[0], FirstC: f.V[0], FirstS: f.Sum[0],
		LastTS: f.TS[n-1], LastC: f.V[n-1], LastS: f.Sum[n-1],
		Bins: map[int64][2]float64{},
	}
	for k := 1; k < n; k++ {
		dc, ds := f.V[k]-f.V[k-1], f.Sum[k]-f.Sum[k-1]
		if dc <= 0 || ds < 0 {
			continue
		}
		b := int64(math.Floor(f.TS[k] / binS))
		a := fh.Bins[b]
		fh.Bins[b] = [2]float64{a[0] + ds, a[1] + dc}
	}
	return fh
}

// EngineHoursOf splits raw series (whole run) by hour and digests each: the input of Compute when the caller
// holds the points (tests, small runs), through the same statistics as the store's digests.
func EngineHoursOf(raws map[string][]store.EngineRaw, binS float64) *EngineHours {
	byHour := map[int64]map[string][]store.EngineRaw{}
	for m, rs := range raws {
		for i := range rs {
			r := &rs[i]
			stride := len(r.Bounds) + 1
			for k := 0; k < len(r.TS); {
				h := int64(math.Floor(r.TS[k] / 3600))
				e := k
				for e < len(r.TS) && int64(math.Floor(r.TS[e]/3600)) == h {
					e++
				}
				part := *r
				part.TS, part.V = r.TS[k:e], r.V[k:e]
				if r.Hist {
					part.Sum = r.Sum[k:e]
					if len(r.Buckets) >= e*stride {
						part.Buckets = r.Buckets[k*stride : e*stride]
					}
				}
				if byHour[h] == nil {
					byHour[h] = map[string][]store.EngineRaw{}
				}
				byHour[h][m] = append(byHour[h][m], part)
				k = e
			}
		}
	}
	hours := slices.Sorted(maps.Keys(byHour))
	eh := &EngineHours{}
	for _, h := range hours {
		eh.Hours = append(eh.Hours, DigestEngineHour(h, byHour[h], math.Inf(-1), math.Inf(1), binS))
	}
	eh.Part = func(i int, lo, hi float64) EngineHour {
		return DigestEngineHour(hours[i], byHour[hours[i]], lo, hi, binS)
	}
	return eh
}

// inRange is hour i's digest over [lo, hi]: the whole hour's when the hour lies inside, nil when it lies
// outside, else digested again over the range (Part, once per hour and range).
func (e *EngineHours) inRange(i int, lo, hi float64) *EngineHour {
	h := &e.Hours[i]
	switch {
	case h.T1 < h.T0 || h.T1 < lo || h.T0 > hi:
		return nil
	case h.T0 >= lo && h.T1 <= hi:
		return h
	}
	k := partKey{i, lo, hi}
	if p, ok := e.parts[k]; ok {
		return &p
	}
	if e.Part == nil {
		return nil
	}
	p := e.Part(i, lo, hi)
	if e.parts == nil {
		e.parts = map[partKey]EngineHour{}
	}
	e.parts[k] = p
	return &p
}

// has reports whether any hour holds a series of metric.
func (e *EngineHours) has(metric string) bool {
	for i := range e.Hours {
		if mh := e.Hours[i].Metrics[metric]; mh != nil && len(mh.Series) > 0 {
			return true
		}
	}
	return false
}

// seriesStat is one series' statistics over a range, hours combined.
type seriesStat struct {
	Addr, Group, DP string
	Num, Den        float64 // time-weighted sums
	Rise            float64 // positive increases ending in range
	N               int
}

// series combines metric's series over [lo, hi], in series key order. Across a boundary the earlier hour's last
// sample holds until the later hour's first (at most gapHold of its hour's median interval; the run's last sample
// holds one median interval), and the later hour's first sample rises from the earlier's last.
func (e *EngineHours) series(metric string, lo, hi float64) []seriesStat {
	present := map[string][]int{} // series key → hours holding it
	for i := range e.Hours {
		if mh := e.Hours[i].Metrics[metric]; mh != nil {
			for k := range mh.Series {
				present[k] = append(present[k], i)
			}
		}
	}
	out := make([]seriesStat, 0, len(present))
	for _, key := range slices.Sorted(maps.Keys(present)) {
		hs := present[key]
		var st seriesStat
		fallback := 0.0 // the median of the hours' medians: the hold of a sample alone in its hour
		var meds []float64
		for _, i := range hs {
			if m := e.Hours[i].Metrics[metric].Series[key].Med; m > 0 {
				meds = append(meds, m)
			}
		}
		if len(meds) > 0 {
			fallback = median(meds)
		} else {
			fallback = 1
		}
		for j, i := range hs {
			full := e.Hours[i].Metrics[metric].Series[key]
			if j == 0 {
				st.Addr, st.Group, st.DP = full.Addr, full.Group, full.DP
			}
			rh := e.inRange(i, lo, hi)
			if rh == nil {
				continue
			}
			part := rh.Metrics[metric].Series[key]
			if part == nil || part.N == 0 {
				continue
			}
			st.N += part.N
			st.Num += part.Num
			st.Den += part.Den
			st.Rise += part.Rise
			if part.FirstIn && j > 0 {
				if d := full.FirstV - e.Hours[hs[j-1]].Metrics[metric].Series[key].LastV; d > 0 {
					st.Rise += d
				}
			}
			if part.LastIn && full.LastV == full.LastV {
				med := full.Med
				if med <= 0 {
					med = fallback
				}
				dt := med
				if j+1 < len(hs) {
					dt = math.Min(e.Hours[hs[j+1]].Metrics[metric].Series[key].FirstTS-full.LastTS, gapHold(med))
				}
				if dt > 0 {
					st.Num += full.LastV * dt
					st.Den += dt
				}
			}
		}
		if st.N > 0 {
			out = append(out, st)
		}
	}
	return out
}

// timeWeighted is Σ v·dt / Σ dt over every sample of metric's series in [lo, hi] (series), with the time
// covered.
func (e *EngineHours) timeWeighted(metric string, lo, hi float64) (mean, covered float64) {
	var num, den float64
	for _, st := range e.series(metric, lo, hi) {
		num += st.Num
		den += st.Den
	}
	if den == 0 {
		return math.NaN(), 0
	}
	return num / den, den
}

// rise is the sum of the positive increases of metric's series ending in [lo, hi] (a decrease is a reset:
// skipped, never counted negative).
func (e *EngineHours) rise(metric string, lo, hi float64) float64 {
	total := 0.0
	for _, st := range e.series(metric, lo, hi) {
		total += st.Rise
	}
	return total
}

// newest is the newest scrape time of metric.
func (e *EngineHours) newest(metric string) float64 {
	t := math.Inf(-1)
	for i := range e.Hours {
		if mh := e.Hours[i].Metrics[metric]; mh != nil {
			for _, s := range mh.Series {
				t = math.Max(t, s.LastTS)
			}
		}
	}
	return t
}

// peak is the highest per-engine value of metric (all labels and dp ranks summed at one scrape) in [lo, hi].
func (e *EngineHours) peak(metric string, lo, hi float64) (float64, bool) {
	peak, found := math.Inf(-1), false
	for i := range e.Hours {
		if mh := e.Hours[i].Metrics[metric]; mh == nil {
			continue
		}
		rh := e.inRange(i, lo, hi)
		if rh == nil || rh.Metrics[metric] == nil {
			continue
		}
		for _, p := range rh.Metrics[metric].Peaks {
			peak, found = math.Max(peak, p), true
		}
	}
	return peak, found
}

// latencyBins is, per bin of binS seconds and engine, metric's Δsum and Δcount (the engine's histograms summed
// at each scrape; an increase across an hour boundary goes to the later scrape's bin), and the engines seen.
func (e *EngineHours) latencyBins(metric string, binS float64) (map[int64]map[string]*[2]float64, int) {
	bins := map[int64]map[string]*[2]float64{}
	add := func(b int64, addr string, ds, dc float64) {
		if bins[b] == nil {
			bins[b] = map[string]*[2]float64{}
		}
		a := bins[b][addr]
		if a == nil {
			a = &[2]float64{}
			bins[b][addr] = a
		}
		a[0] += ds
		a[1] += dc
	}
	prev := map[string]*FoldHour{}
	for i := range e.Hours {
		mh := e.Hours[i].Metrics[metric]
		if mh == nil {
			continue
		}
		for _, a := range slices.Sorted(maps.Keys(mh.Folds)) {
			f := mh.Folds[a]
			if p := prev[a]; p != nil {
				if dc, ds := f.FirstC-p.LastC, f.FirstS-p.LastS; dc > 0 && ds >= 0 {
					add(int64(math.Floor(f.FirstTS/binS)), a, ds, dc)
				}
			}
			for _, b := range slices.Sorted(maps.Keys(f.Bins)) {
				add(b, a, f.Bins[b][0], f.Bins[b][1])
			}
			prev[a] = f
		}
	}
	return bins, len(prev)
}
