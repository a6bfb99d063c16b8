package advisory

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

func dur(s float64) string {
	switch {
	case s >= 3600:
		return fmt.Sprintf("%.1fh", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.0fmin", s/60)
	}
	return fmt.Sprintf("%.0fs", s)
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

// A1: a phase open far longer than it usually takes. Only phases of this run (t0 ≥ start) count; an open marker
// whose process already closed a later phase of the same name (same node and rank) is an orphan of a crash, not
// a stall.
func (c *ctx) stall(r *RuleInfo) {
	ph := c.ph
	type hit struct {
		age    float64
		ranks  []int
		nodes  map[string]bool
		median float64
	}
	hits := map[string]*hit{}
	for _, p := range ph.open {
		if p.T0 < c.in.StartTS {
			continue
		}
		if t, ok := ph.lastClosed[stallKey{p.Node, p.Rank, p.Name}]; ok && t > p.T0 {
			continue
		}
		ds := ph.durs[p.Name]
		if len(ds) < c.th.StallMinClosed {
			continue
		}
		med := median(ds)
		age := c.in.Edge - p.T0
		if age <= math.Max(c.th.StallFactor*med, c.th.StallMinAgeS) {
			continue
		}
		h := hits[p.Name]
		if h == nil {
			h = &hit{nodes: map[string]bool{}, median: med}
			hits[p.Name] = h
		}
		h.age = math.Max(h.age, age)
		h.ranks = append(h.ranks, p.Rank)
		h.nodes[p.Node] = true
	}
	names := make([]string, 0, len(hits))
	for n := range hits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := hits[n]
		sort.Ints(h.ranks)
		msg := fmt.Sprintf("Phase '%s' has been open for %s on %d rank(s) — %.0fx its median duration (%s); the pipeline is stalled, not slow.",
			n, dur(h.age), len(h.ranks), h.age/math.Max(h.median, 1e-9), dur(h.median))
		if n == "train_wait" {
			msg += " The trainer is starved of data: check the rollout side (engines, data buffer, aborted requests)."
		}
		c.fire(r, msg, StallEvidence{
			Phase: n, AgeS: h.age, MedianS: h.median,
			Ranks: h.ranks, Nodes: sortedKeys(h.nodes),
		})
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A2: many requests aborted client-side in the last 30 minutes.
func (c *ctx) abortStorm(r *RuleInfo) {
	if !c.eng.has(MRequests) || !c.eng.has(MAborted) {
		c.skip(r, "no "+MRequests+" / "+MAborted+" engine series")
		return
	}
	end := math.Max(c.eng.newest(MRequests), c.eng.newest(MAborted))
	lo := end - c.th.AbortWindowS
	total, aborted := c.eng.rise(MRequests, lo, end), c.eng.rise(MAborted, lo, end)
	if total < c.th.AbortMinRequests || aborted/total <= c.th.AbortRatio {
		return
	}
	runT, runA := c.eng.rise(MRequests, math.Inf(-1), end), c.eng.rise(MAborted, math.Inf(-1), end)
	msg := fmt.Sprintf("%s of engine requests were aborted client-side in the last %s (%.0f/%.0f; %s over the run) — request timeouts are poisoning samples.",
		pct(aborted/total), dur(c.th.AbortWindowS), aborted, total, pct(runA/math.Max(runT, 1)))
	if n := c.in.Config.NSamplesPerPrompt; n > 1 {
		msg += fmt.Sprintf(" With %d samples per prompt one aborted sample can discard or re-generate its whole group, amplifying the loss.", n)
	}
	c.fire(r, msg, AbortStormEvidence{
		WindowS: c.th.AbortWindowS, Aborted: aborted,
		Requests: total, Ratio: aborted / total, RunRatio: runA / math.Max(runT, 1),
	})
}

// kvFigures are what A3 and A4 read: the time-weighted mean KV cache usage over every engine and scrape, and
// whether A3 holds (the KV pool, not the request cap, bounds concurrency).
type kvFigures struct {
	has           bool // the run has token-usage series
	mean, covered float64
	peak          float64
	havePeak      bool
	bound         bool
}

func (c *ctx) kvFigures() *kvFigures {
	if c.kvFig != nil {
		return c.kvFig
	}
	k := &kvFigures{has: c.eng.has(MKVUsage)}
	c.kvFig = k
	if !k.has {
		return k
	}
	lo, hi := c.bounds()
	k.mean, k.covered = c.eng.timeWeighted(MKVUsage, lo, hi)
	if k.covered == 0 {
		return k
	}
	maxRunning := c.in.Config.MaxRunningRequests
	k.peak, k.havePeak = c.eng.peak(MRunning, lo, hi)
	k.bound = k.mean > c.th.KVBoundTokenUsage && maxRunning > 0 && k.havePeak && k.peak < c.th.KVBoundRunningRatio*float64(maxRunning)
	return k
}

// A3: KV cache usage pegged while concurrency stays far below the request cap.
func (c *ctx) kvBound(r *RuleInfo) {
	k := c.kvFigures()
	if !k.has {
		c.skip(r, "no "+MKVUsage+" engine series")
		return
	}
	if k.covered == 0 {
		return
	}
	maxRunning := c.in.Config.MaxRunningRequests
	if k.bound {
		msg := fmt.Sprintf("KV cache usage is pegged at %s while peak concurrency (%.0f) stays far below --sglang-max-running-requests (%d): the KV pool, not the request cap, limits concurrency — raise --sglang-mem-fraction-static%s; do NOT lower the request cap.",
			pct(k.mean), k.peak, maxRunning, memFrac(c.in.Config.MemFractionStatic))
		c.fire(r, msg, KVEvidence{TokenUsageMean: k.mean, PeakRunning: new(k.peak), MaxRunningRequests: new(maxRunning)})
		return
	}
	if maxRunning <= 0 && k.mean > c.th.KVBoundTokenUsage {
		c.skip(r, "--sglang-max-running-requests unknown (meta.json args or advisory config)")
	}
}

// A4: KV cache usage consistently high, when A3 does not already say why.
func (c *ctx) kvHigh(r *RuleInfo) {
	k := c.kvFigures()
	if !k.has {
		c.skip(r, "no "+MKVUsage+" engine series")
		return
	}
	if k.covered == 0 || k.bound {
		return
	}
	if k.mean > c.th.HighTokenUsage {
		c.fire(r, fmt.Sprintf("KV cache usage is consistently high (time-weighted mean %s) — likely a throughput bottleneck; consider more GPUs or a smaller rollout batch.", pct(k.mean)),
			KVEvidence{TokenUsageMean: k.mean})
	}
}

func memFrac(f float64) string {
	if f > 0 {
		return fmt.Sprintf(" (currently %g)", f)
	}
	return ""
}

// lastValue is the value at the highest step of the first key present.
func (c *ctx) lastValue(keys []string) (key string, step, v float64, ok bool) {
	for _, k := range keys {
		s, found := c.in.Steps[k]
		if !found || len(s.X) == 0 {
			continue
		}
		n := len(s.X) - 1
		return k, s.X[n], s.Y[n], true
	}
	return "", 0, 0, false
}

// A5: the newest step's groups have zero reward std (no policy gradient from them). The dumps (exact group
// counts) when the run has them, else the trainer's metric.
func (c *ctx) zeroStd(r *RuleInfo) {
	if d := c.in.Dump; d != nil && d.Groups > 0 {
		frac := float64(d.ZeroStdGroups) / float64(d.Groups)
		if frac < c.th.ZeroStdFrac {
			return
		}
		msg := fmt.Sprintf("%d/%d groups in rollout %d have zero reward std — those groups contribute zero policy gradient.", d.ZeroStdGroups, d.Groups, d.Step)
		if d.MaxAbsGroupRewardMean != nil && *d.MaxAbsGroupRewardMean < 1e-12 {
			msg += " Every reward is 0: a systematic failure (reward function, answer parsing, or a broken environment), not hard prompts."
		}
		c.fire(r, msg, ZeroStdEvidence{
			Source: "dumps", Step: float64(d.Step), Frac: frac,
			ZeroStdGroups: new(d.ZeroStdGroups), Groups: new(d.Groups),
		})
		return
	}
	key, step, frac, ok := c.lastValue(ZeroStdKeys)
	if !ok {
		c.skip(r, "no zero-std metric ("+strings.Join(ZeroStdKeys, ", ")+") logged")
		return
	}
	if frac < c.th.ZeroStdFrac {
		return
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "%s of the groups in rollout %.0f have zero reward std — those groups contribute zero policy gradient.", pct(frac), step)
	ev := ZeroStdEvidence{Key: key, Step: step, Frac: frac}
	for _, rk := range []string{KeyRawReward, "rollout/reward"} {
		if s, found := c.in.Steps[rk]; found {
			if i := sort.SearchFloat64s(s.X, step); i < len(s.X) && s.X[i] == step {
				ev.RewardMean = new(s.Y[i])
				if math.Abs(s.Y[i]) < 1e-12 {
					msg.WriteString(" Every reward is 0: a systematic failure (reward function, answer parsing, or a broken environment), not hard prompts.")
				}
			}
			break
		}
	}
	c.fire(r, msg.String(), ev)
}

// A6: too many samples of the newest step are truncated. The trajectories (final attempt statuses of the
// consumed samples) are used when they have the newest step; the trainer's metric otherwise.
func (c *ctx) truncation(r *RuleInfo) {
	var frac, step float64
	var ev TruncationEvidence
	key, mstep, mv, mok := c.lastValue(TruncatedKeys)
	d := c.in.Dump
	dok := d != nil && d.TruncatedFrac != nil
	switch {
	case c.in.Newest != nil && c.in.Newest.WithStatus > 0 && (!mok || float64(c.in.Newest.Step) >= mstep) && (!dok || c.in.Newest.Step >= d.Step):
		n := c.in.Newest
		frac, step = float64(n.Truncated)/float64(n.WithStatus), float64(n.Step)
		ev.Source = "trajectories"
		ev.Truncated, ev.Samples = new(n.Truncated), new(n.WithStatus)
	case dok && (!mok || float64(d.Step) >= mstep):
		frac, step = *d.TruncatedFrac, float64(d.Step)
		ev.Source, ev.Samples = "dumps", new(d.Samples)
	case mok:
		frac, step = mv, mstep
		ev.Source, ev.Key = "metrics", key
	default:
		c.skip(r, "no consumed step in the trajectories, no train dump and no truncation metric logged")
		return
	}
	ev.Step, ev.Frac = step, frac
	if frac < c.th.TruncatedFrac {
		return
	}
	lenFlag := "--rollout-max-response-len"
	if c.in.Config.MaxResponseLen > 0 {
		lenFlag += fmt.Sprintf(" (%d)", c.in.Config.MaxResponseLen)
	}
	c.fire(r, fmt.Sprintf("%s of the samples of rollout %.0f are truncated — check %s: in multi-turn agentic runs the per-turn cap is usually the binding limit.",
		pct(frac), step, lenFlag), ev)
}

// A7: per-token columns of the newest train dump could not be aligned (context-parallel layout): blank there
// means unreadable, not undumped. Info level, but it counts as an alarm (the reference's tiering).
func (c *ctx) cpAlignment(r *RuleInfo) {
	d := c.in.Dump
	if d == nil {
		why := c.in.DumpWhy
		if why == "" {
			why = "no train dumps in this run"
		}
		c.skip(r, why)
		return
	}
	if d.AlignmentFailed == 0 {
		return
	}
	c.fire(r, fmt.Sprintf("Per-token columns are blank for %d sample(s) of rollout %d: their context-parallel shards could not be put back together (the dump predates the cp_rank/cp_size fields and the layout could not be inferred). Blank here means unreadable, not undumped.",
		d.AlignmentFailed, d.Step), CPAlignmentEvidence{Step: d.Step, Samples: d.AlignmentFailed})
}

// stragglerExcluded are phases whose length is set by others (waiting, or ending on a collective).
var stragglerExcluded = map[string]bool{"train_wait": true, "update_weights": true, "update_weights_implementation": true}

// S1: one train rank is the slowest at a phase in most recent steps, by a clear margin: relative (the ratio)
// and absolute (the seconds it costs every step).
func (c *ctx) stragglerRanks(r *RuleInfo) {
	type rk = RankKey
	ph := c.ph
	per := ph.train // phase → step → rank → duration
	type finding struct {
		phase         string
		ratio, frac   float64
		steps         int
		median, other float64
	}
	best := map[rk]finding{}
	anyEligible := false
	for name, bySteps := range per {
		var steps []int
		for st, ranks := range bySteps {
			if len(ranks) >= 2 {
				steps = append(steps, st)
			}
		}
		sort.Ints(steps)
		if len(steps) > c.th.StragglerWindow {
			steps = steps[len(steps)-c.th.StragglerWindow:]
		}
		if len(steps) < c.th.StragglerMinSteps {
			continue
		}
		anyEligible = true
		slowest := map[rk]int{}
		durs := map[rk][]float64{}
		for _, st := range steps {
			var top rk
			topD := math.Inf(-1)
			for k, d := range bySteps[st] {
				durs[k] = append(durs[k], d)
				if d > topD || (d == topD && (k.Node < top.Node || k.Node == top.Node && k.Rank < top.Rank)) {
					top, topD = k, d
				}
			}
			slowest[top]++
		}
		for k, n := range slowest {
			frac := float64(n) / float64(len(steps))
			if frac < c.th.StragglerSlowestFrac {
				continue
			}
			var others []float64
			for o, ds := range durs {
				if o != k {
					others = append(others, median(ds))
				}
			}
			me, om := median(durs[k]), median(others)
			if om <= 0 || me/om < c.th.StragglerRankRatio || me-om < c.th.StragglerMinGapS {
				continue
			}
			f := finding{name, me / om, frac, len(steps), me, om}
			if cur, ok := best[k]; !ok || f.ratio > cur.ratio {
				best[k] = f
			}
		}
	}
	if !anyEligible {
		c.skip(r, fmt.Sprintf("fewer than %d steps with per-rank train phases", c.th.StragglerMinSteps))
	}
	keys := make([]rk, 0, len(best))
	for k := range best {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Rank < keys[j].Rank })
	for _, k := range keys {
		f := best[k]
		c.fire(r, fmt.Sprintf("Rank %d (%s, GPU %v) is the slowest at '%s' in %s of the last %d steps, %.0f%% slower than the median rank (%s vs %s): every synchronous step waits for it — check that GPU (clocks, thermals, XID errors) and its node's network.",
			k.Rank, k.Node, ph.gpus[k].GPUs, f.phase, pct(f.frac), f.steps, (f.ratio-1)*100, dur2(f.median), dur2(f.other)),
			StragglerRankEvidence{
				Rank: k.Rank, Node: k.Node, GPUs: ph.gpus[k].GPUs, Phase: f.phase, Ratio: f.ratio,
				SlowestFrac: f.frac, Steps: f.steps, MedianS: f.median, OthersMedianS: f.other,
			})
	}
}

func dur2(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.1fs", s)
	}
	return dur(s)
}

// S2: one engine's per-token latency is the highest in most recent time bins, by a wide margin. Per-token
// latency is inter_token_latency_seconds; time_per_output_token_seconds, which current sglang no longer exports,
// only for a run that has no inter-token latency (an older engine), and the end-to-end latency last.
func (c *ctx) stragglerEngines(r *RuleInfo) {
	var metric string
	for _, m := range []string{MITL, MTPOT, ME2E} {
		if c.eng.has(m) {
			metric = m
			break
		}
	}
	if metric == "" {
		c.skip(r, "no latency histogram ("+MITL+", "+MTPOT+", "+ME2E+")")
		return
	}
	binS := c.th.StragglerEngineBinS
	bins, engines := c.eng.latencyBins(metric, binS)
	if engines < 2 {
		c.skip(r, "fewer than two engines")
		return
	}
	type acc struct{ sum, cnt float64 }
	var keys []int64
	for b, m := range bins {
		if len(m) >= 2 {
			keys = append(keys, b)
		}
	}
	slices.Sort(keys)
	if len(keys) > c.th.StragglerWindow {
		keys = keys[len(keys)-c.th.StragglerWindow:]
	}
	if len(keys) < c.th.StragglerMinSteps {
		c.skip(r, fmt.Sprintf("fewer than %d %s bins with two engines serving", c.th.StragglerMinSteps, dur(binS)))
		return
	}
	slowest := map[string]int{}
	tot := map[string]*acc{}
	for _, b := range keys {
		top, topV := "", math.Inf(-1)
		for a, v := range bins[b] {
			m := v[0] / v[1]
			if m > topV || (m == topV && a < top) {
				top, topV = a, m
			}
			t := tot[a]
			if t == nil {
				t = &acc{}
				tot[a] = t
			}
			t.sum += v[0]
			t.cnt += v[1]
		}
		slowest[top]++
	}
	addrs := sortedKeys(func() map[string]bool {
		m := map[string]bool{}
		for a := range slowest {
			m[a] = true
		}
		return m
	}())
	for _, a := range addrs {
		frac := float64(slowest[a]) / float64(len(keys))
		if frac < c.th.StragglerSlowestFrac {
			continue
		}
		var others []float64
		for o, t := range tot {
			if o != a {
				others = append(others, t.sum/t.cnt)
			}
		}
		me, om := tot[a].sum/tot[a].cnt, median(others)
		if om <= 0 || me/om < c.th.StragglerEngineRatio {
			continue
		}
		c.fire(r, fmt.Sprintf("Engine %s has the highest %s in %s of the last %d %s bins, %.1fx the median engine (%.3gs vs %.3gs): its samples finish last and hold the batch back — check its GPUs and whether it runs a different config.",
			a, strings.TrimPrefix(metric, "sglang:"), pct(frac), len(keys), dur(binS), me/om, me, om),
			StragglerEngineEvidence{
				Engine: a, Metric: metric, Ratio: me / om, SlowestFrac: frac, Bins: len(keys), MeanS: me,
				OthersMedianS: om,
			})
	}
}

// DriftKeyLike reports whether a train/ key names a rollout-vs-train log-prob difference.
func DriftKeyLike(k string) bool {
	l := strings.ToLower(k)
	return strings.HasPrefix(l, "train/") && (strings.Contains(l, "logprob") || strings.Contains(l, "log_prob")) &&
		strings.Contains(l, "diff")
}

// D1: the rollout-vs-train log-prob difference grew (engine and trainer disagree more and more: a kernel,
// precision or weight-sync problem; importance weights blow up).
func (c *ctx) drift(r *RuleInfo) {
	var key string
	var xs, ys []float64
	for _, k := range DriftKeys {
		if s, ok := c.in.Steps[k]; ok && len(s.X) > 0 {
			key, xs, ys = k, s.X, s.Y
			break
		}
	}
	if key == "" {
		var like []string
		for k := range c.in.Steps {
			if DriftKeyLike(k) {
				like = append(like, k)
			}
		}
		sort.Strings(like)
		if len(like) > 0 {
			key, xs, ys = like[0], c.in.Steps[like[0]].X, c.in.Steps[like[0]].Y
		}
	}
	if key == "" {
		a, okA := c.in.Steps[DriftFallback[0]]
		b, okB := c.in.Steps[DriftFallback[1]]
		if okA && okB {
			key = "|" + DriftFallback[0] + " − " + DriftFallback[1] + "|"
			for i, x := range a.X {
				if j := sort.SearchFloat64s(b.X, x); j < len(b.X) && b.X[j] == x {
					xs, ys = append(xs, x), append(ys, math.Abs(a.Y[i]-b.Y[j]))
				}
			}
		}
	}
	if key == "" {
		c.skip(r, "no rollout-vs-train log-prob diff logged ("+strings.Join(DriftKeys, ", ")+", or rollout/log_probs with rollout/rollout_log_probs)")
		return
	}
	var vals []float64
	var steps []float64
	for i, v := range ys {
		if v == v && !math.IsInf(v, 0) {
			vals, steps = append(vals, math.Abs(v)), append(steps, xs[i])
		}
	}
	if len(vals) < c.th.DriftMinSteps {
		c.skip(r, fmt.Sprintf("%s: %d steps, need %d", key, len(vals), c.th.DriftMinSteps))
		return
	}
	k := max(3, len(vals)/5)
	base, recent := median(vals[:k]), median(vals[len(vals)-k:])
	if recent < c.th.DriftRatio*base || recent-base < c.th.DriftMinDelta {
		return
	}
	c.fire(r, fmt.Sprintf("Rollout-vs-train log-prob difference grew from %.4g (median of steps %.0f–%.0f) to %.4g (steps %.0f–%.0f), %.1fx: the engine and the trainer disagree more and more about the same tokens — check weight sync, engine/trainer precision and kernels; importance ratios (TIS) will blow up.",
		base, steps[0], steps[k-1], recent, steps[len(steps)-k], steps[len(steps)-1], recent/math.Max(base, 1e-12)),
		DriftEvidence{Key: key, Baseline: base, Recent: recent, Ratio: recent / math.Max(base, 1e-12), Steps: len(vals)})
}

// T1: low MFU over the steady steps (step 0 dropped).
func (c *ctx) mfu(r *RuleInfo) {
	s, ok := c.in.Steps[KeyMFU]
	if !ok || len(s.X) < 2 {
		c.skip(r, KeyMFU+" not logged on at least two steps")
		return
	}
	ys := s.Y[1:]
	sum := 0.0
	for _, v := range ys {
		sum += v
	}
	m := &MFU{Latest: s.Y[len(s.Y)-1], Mean: sum / float64(len(ys)), Steps: len(ys)}
	if p, ok := c.in.Steps[KeyMFUPeak]; ok && len(p.Y) > 0 {
		v := p.Y[len(p.Y)-1]
		m.Peak = &v
	}
	c.mfuSum = m
	th := c.th.LowMFU
	if c.in.Config.LowMFUThreshold != nil {
		th = *c.in.Config.LowMFUThreshold
	}
	if th <= 0 || m.Steps < c.th.MFUMinSteps || m.Mean >= th {
		return
	}
	peak := "the device's peak"
	if m.Peak != nil {
		peak = fmt.Sprintf("the device's %.0f TFLOP/s", *m.Peak)
	}
	c.fire(r, fmt.Sprintf("Model FLOPs utilization averaged %.1f%% of %s over %d train steps — the training step is computing slowly, not waiting: check parallelism (TP/PP/CP), micro-batch size, recomputation and sequence packing.",
		m.Mean*100, peak, m.Steps), LowMFUEvidence{Mean: m.Mean, Threshold: th, Steps: m.Steps})
}

// T2: peak concurrency far below the request cap.
func (c *ctx) lowConcurrency(r *RuleInfo) {
	maxRunning := c.in.Config.MaxRunningRequests
	if maxRunning <= 0 {
		c.skip(r, "--sglang-max-running-requests unknown (meta.json args or advisory config)")
		return
	}
	lo, hi := c.bounds()
	peak, ok := c.eng.peak(MRunning, lo, hi)
	if !ok {
		c.skip(r, "no "+MRunning+" engine series")
		return
	}
	if peak >= c.th.LowConcurrencyRatio*float64(maxRunning) {
		return
	}
	msg := fmt.Sprintf("Peak concurrency (%.0f) stayed under %s of --sglang-max-running-requests (%d); consider lowering it", peak, pct(c.th.LowConcurrencyRatio), maxRunning)
	if c.in.Config.Colocate != nil && *c.in.Config.Colocate {
		msg += " to free memory for training (colocate)"
	}
	c.fire(r, msg+".", LowConcurrencyEvidence{PeakRunning: peak, MaxRunningRequests: maxRunning})
}

// T3: low prefix-cache hit rate (not in colocate runs, where the cache is flushed at every offload).
func (c *ctx) lowCacheHit(r *RuleInfo) {
	if c.in.Config.Colocate == nil {
		c.skip(r, "unknown whether the run is colocated (no train and rollout lane roles)")
		return
	}
	if *c.in.Config.Colocate {
		return
	}
	lo, hi := c.bounds()
	mean, covered := c.eng.timeWeighted(MCacheHit, lo, hi)
	if covered == 0 {
		c.skip(r, "no "+MCacheHit+" engine series")
		return
	}
	if mean >= c.th.LowCacheHit {
		return
	}
	c.fire(r, fmt.Sprintf("Prefix cache hit rate is low (time-weighted mean %.1f%%); consider raising --sglang-mem-fraction-static%s.",
		mean*100, memFrac(c.in.Config.MemFractionStatic)), LowCacheHitEvidence{CacheHitMean: mean})
}

// T4: within an engine, some dp ranks carry the requests while others idle.
func (c *ctx) dpImbalance(r *RuleInfo) {
	lo, hi := c.bounds()
	byEngine := map[string][]seriesStat{}
	for _, st := range c.eng.series(MRunning, lo, hi) {
		if st.DP != "" {
			byEngine[st.Addr+"\x00"+st.Group] = append(byEngine[st.Addr+"\x00"+st.Group], st)
		}
	}
	keys := make([]string, 0, len(byEngine))
	for k, rs := range byEngine {
		if len(rs) >= 2 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		rs := byEngine[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i].DP < rs[j].DP })
		means := map[string]float64{}
		busy, idle := math.Inf(-1), math.Inf(1)
		var parts []string
		for _, r := range rs {
			if r.Den == 0 {
				continue
			}
			m := r.Num / r.Den
			means[r.DP] = m
			busy, idle = math.Max(busy, m), math.Min(idle, m)
			parts = append(parts, fmt.Sprintf("dp%s=%.1f", r.DP, m))
		}
		if len(means) < 2 || busy < c.th.DPImbalanceMinRunning || idle >= c.th.DPImbalanceRatio*busy {
			continue
		}
		c.fire(r, fmt.Sprintf("%s: dp ranks imbalanced (mean running reqs %s) — requests pile onto few ranks; %s.",
			rs[0].Addr, strings.Join(parts, ", "), c.dpHint()), DPImbalanceEvidence{Engine: rs[0].Addr, Means: means})
	}
}

func (c *ctx) dpHint() string {
	cf := c.in.Config
	switch {
	case cf.RouterPolicy == "manual":
		return "the router assigns manually: check --router-assignment-mode"
	case cf.UseMilesRouter != nil && *cf.UseMilesRouter && (cf.RouterDPAware == nil || !*cf.RouterDPAware):
		return "enable dp-aware routing (--router-dp-aware)"
	case cf.UseMilesRouter != nil && !*cf.UseMilesRouter:
		return "route through a dp-aware router (--use-miles-router --router-dp-aware)"
	}
	return "make the router dp-aware (miles: --router-dp-aware) or check its policy"
}

// E1: the policy's entropy collapsed: it fell far from where the run began and sits at, or is still falling fast
// toward, a floor where sampling explores nothing new. A fall that levels off above the floor (the usual decay of
// a healthy run, e.g. 0.93 → 0.5 nats easing toward 0.25) is not a collapse: the projection along the newest
// steps' fitted slope stays above the floor.
func (c *ctx) entropyCollapse(r *RuleInfo) {
	var key string
	var xs, ys []float64
	for _, k := range EntropyKeys {
		if s, ok := c.in.Steps[k]; ok && len(s.X) > 0 {
			key = k
			for i, v := range s.Y {
				if v == v && !math.IsInf(v, 0) {
					xs, ys = append(xs, s.X[i]), append(ys, v)
				}
			}
			break
		}
	}
	if key == "" {
		c.skip(r, "no policy entropy logged ("+strings.Join(EntropyKeys, ", ")+")")
		return
	}
	if len(ys) < c.th.EntropyMinSteps {
		c.skip(r, fmt.Sprintf("%s: %d steps, need %d", key, len(ys), c.th.EntropyMinSteps))
		return
	}
	k := max(3, min(len(ys)/5, c.th.EntropyWindow))
	base, recent := median(ys[:k]), median(ys[len(ys)-k:])
	if !(base > 0) {
		return
	}
	fall := 1 - recent/base
	w := min(len(ys), c.th.EntropyWindow)
	slope := lsqSlope(xs[len(xs)-w:], ys[len(ys)-w:])
	projected := recent
	if slope < 0 {
		projected = recent + slope*float64(w)
	}
	floor := c.th.EntropyFloor
	if fall < c.th.EntropyFallFrac || math.Min(recent, projected) > floor {
		return
	}
	how := fmt.Sprintf("and is below %.3g", floor)
	if recent > floor {
		how = fmt.Sprintf("and still falls %.2g per step: at that rate it reaches %.3g within %d steps", -slope, floor, w)
	}
	c.fire(r, fmt.Sprintf("Policy entropy collapsed: %.3g (median of steps %.0f–%.0f) → %.3g (steps %.0f–%.0f), %.0f%% lower, %s — the policy samples ever fewer distinct answers and stops exploring; check the entropy bonus, clip-higher (ε_high), temperature and learning rate.",
		base, xs[0], xs[k-1], recent, xs[len(xs)-k], xs[len(xs)-1], fall*100, how),
		EntropyCollapseEvidence{
			Key: key, Baseline: base, Recent: recent, K: k, Fall: fall, SlopePerStep: slope, WindowSteps: w,
			Projected: projected, FallFrac: c.th.EntropyFallFrac, Floor: floor,
			FirstStep: xs[0], LastStep: xs[len(xs)-1], Steps: len(ys),
		})
}

// lsqSlope is the least-squares slope of ys over xs (0 when the xs do not vary).
func lsqSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}
