package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// Options control how a generated run is played.
type Options struct {
	Endpoint string // collector OTLP/HTTP host:port (or URL)
	RunDir   string // where sglang_targets.json is written (live)
	// FastForward stamps events with synthetic times from Start and never sleeps; engines are not served, their
	// series are sent over OTLP as the Prometheus receiver would deliver them.
	FastForward    bool
	Speed          float64   // live: simulated seconds per wall second
	MaxSpeed       float64   // fast-forward: cap on simulated seconds per wall second (0: as fast as the collector takes it)
	Start          time.Time // fast-forward: time of simulated second 0
	GPUInterval    float64   // seconds between NVML readings (wall in live mode, simulated in fast-forward)
	ProcInterval   float64   // seconds between process-memory readings
	ScrapeInterval float64   // fast-forward: simulated seconds between engine scrapes
	Linger         time.Duration
	Router         bool // live: also serve a fake router /engine_metrics
	Workers        int
	GiveUp         time.Duration // stop retrying a failing export after this long and end the run (default 1m)
	Log            io.Writer
	// Dumper writes miles dump directories as steps complete (the generator must run with Config.Dumps).
	Dumper *Dumper
	// EngineTraceLevel makes every engine trace its requests as sglang --enable-trace does, at this level
	// (SGLANG_TRACE_LEVEL 1–3; 0 off), under each generate span's traceparent (docs/semconv.md §10).
	EngineTraceLevel int
}

// Report summarizes a run.
type Report struct {
	Steps                            int
	SimSeconds                       float64
	Wall                             time.Duration
	Spans, Logs, Points              int64
	GPUReadings                      int64
	Requests, Bytes, Retries, Failed int64
	FirstError                       string
	RouterURL                        string
	DumpSteps                        int   // steps whose dumps were written
	DumpBytes                        int64 // bytes of dump files written
	DumpError                        string
}

type liveEngine struct {
	tmpl   *gpuTemplate // fast-forward: encoded scrape template
	points int
	eng    *fakesglang.Engine
	srv    *fakesglang.Server
	start  time.Time
	addr   string // host:port
	url    string
}

type runner struct {
	opts   Options
	dumps  chan Event    // to the dump writer's goroutine (nil without a Dumper)
	dumped chan struct{} // closed when it has written everything
	gen    *Generator
	topo   *Topology
	clock  Clock
	// tracers are the engines' request tracers by engine rank (enginetrace.go).
	tracers map[int]*fakesglang.Tracer
	b       *batch
	snd     *sender
	gpu     *gpuModel
	nv      *nvml
	engs    map[EngineRef]*liveEngine
	alive   map[int]EngineRef // engine rank -> live incarnation
	urls    map[EngineRef]string
	router  *fakesglang.Router
	rsrv    *http.Server
	rep     Report
	live    bool
	last    time.Time

	// fast-forward: device readings encoded from per-device templates straight into a request body
	tmpl   [][]*gpuTemplate
	gpuBuf []byte
	gpuN   int
}

// Run plays g into the collector at opts.Endpoint and returns what was sent.
func Run(ctx context.Context, g *Generator, opts Options) (Report, error) {
	if opts.Speed <= 0 {
		opts.Speed = 1
	}
	if opts.GPUInterval <= 0 {
		opts.GPUInterval = 1
	}
	if opts.ProcInterval <= 0 {
		opts.ProcInterval = 5
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = 5
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.GiveUp <= 0 {
		opts.GiveUp = time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	cfg := g.Config()
	r := &runner{opts: opts, gen: g, topo: g.Topology(), engs: map[EngineRef]*liveEngine{}, alive: map[int]EngineRef{}, urls: map[EngineRef]string{}, live: !opts.FastForward}
	if r.live {
		r.clock = Clock{Base: time.Now(), Speed: opts.Speed}
	} else {
		if opts.Start.IsZero() {
			length := cfg.Duration
			if length == 0 { // bounded by steps: as long as generating them takes
				var err error
				if length, err = Length(cfg); err != nil {
					return Report{}, err
				}
			}
			opts.Start = time.Now().Add(-time.Duration(math.Ceil(length)) * time.Second).Truncate(time.Second)
		}
		r.clock = Clock{Base: opts.Start, Speed: 1}
	}
	r.b = newBatch(r.clock, cfg.RunID)
	r.b.descriptions = r.live
	r.gpu = newGPUModel(r.topo, cfg.Mode == ModeColocate, cfg.Seed, cfg.EngineMaxRunning)
	r.nv = newNVML(r.topo, r.clock.Base.Add(-3*time.Hour))
	r.snd = newSender(ctx, opts.Endpoint, opts.Workers, opts.GiveUp)
	startWall := time.Now()
	if opts.Dumper != nil {
		r.dumps, r.dumped = make(chan Event, 4), make(chan struct{})
		go r.dumpLoop(opts.Dumper)
	}
	err := r.loop(ctx)
	if r.snd.err() == nil {
		r.flush(true)
	}
	if r.dumps != nil {
		close(r.dumps)
		<-r.dumped
		r.rep.DumpSteps, r.rep.DumpBytes = opts.Dumper.Steps, opts.Dumper.Written
	}
	r.snd.close()
	r.shutdownEngines(context.WithoutCancel(ctx)) // the run's ctx may be done: the engines still stop gracefully
	r.rep.Wall = time.Since(startWall)
	r.rep.Steps = g.Stats.Steps
	r.rep.Requests, r.rep.Bytes = r.snd.requests.Load(), r.snd.bytes.Load()
	r.rep.Retries, r.rep.Failed = r.snd.retries.Load(), r.snd.failed.Load()
	if e, ok := r.snd.firstErr.Load().(string); ok {
		r.rep.FirstError = e
	}
	if err == nil {
		err = r.snd.err()
	}
	if err == nil && r.rep.Failed > 0 {
		err = fmt.Errorf("%d OTLP requests failed (first: %s)", r.rep.Failed, r.rep.FirstError)
	}
	return r.rep, err
}

func (r *runner) loop(ctx context.Context) error {
	for _, e := range r.topo.Engines {
		if err := r.engineUp(EngineRef{e.Rank, 0}, 0); err != nil {
			return err
		}
	}
	if r.live && r.opts.Router {
		if err := r.startRouter(); err != nil {
			return err
		}
	}
	gpuStep := r.opts.GPUInterval
	procEvery := max(1, int(math.Round(r.opts.ProcInterval/r.opts.GPUInterval)))
	scrapeStep := r.opts.ScrapeInterval
	if r.live {
		gpuStep *= r.opts.Speed
	}
	nextGPU, nextScrape := 0.0, 0.0
	gpuTicks := 0
	end := math.Inf(1)
	lastEvent := 0.0
	paceStart, paceNext := time.Now(), 0.0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.snd.err(); err != nil {
			return err
		}
		te := r.gen.PeekTime()
		if math.IsInf(te, 1) && math.IsInf(end, 1) {
			end = lastEvent + r.gen.Tail() // a stalled run keeps reporting idle engines and GPUs
			if r.gen.Tail() > 0 && !r.live {
				// End the hold on an engine scrape (with the default intervals also a GPU reading): the run's
				// last timestamp is then the same in every stream, whichever a reader loads first.
				end = math.Ceil(end/scrapeStep) * scrapeStep
			}
			if r.live {
				end += r.opts.Linger.Seconds() * r.opts.Speed
			}
			r.rep.SimSeconds = lastEvent
		}
		tick := nextGPU
		if !r.live {
			tick = math.Min(tick, nextScrape)
		}
		next := math.Min(te, tick)
		if next > end {
			return nil
		}
		if r.live {
			if err := r.waitUntil(ctx, r.clock.At(next)); err != nil {
				return err
			}
		} else if r.opts.MaxSpeed > 0 && next > paceNext {
			w := paceStart.Add(time.Duration(next / r.opts.MaxSpeed * float64(time.Second)))
			if err := r.waitUntil(ctx, w); err != nil {
				return err
			}
			paceNext = next + 1 // re-check at most once per simulated second
		}
		switch {
		case te <= tick:
			e, _ := r.gen.Next()
			lastEvent = e.T
			if err := r.handle(ctx, e); err != nil {
				return err
			}
		case nextGPU <= nextScrape || r.live:
			if err := r.gpuTick(nextGPU, gpuStep, gpuTicks%procEvery == 0); err != nil {
				return err
			}
			gpuTicks++
			nextGPU += gpuStep
		default:
			if err := r.scrapeTick(nextScrape); err != nil {
				return err
			}
			nextScrape += scrapeStep
		}
		r.flush(false)
	}
}

// waitUntil sleeps until wall time w, flushing what is buffered first.
func (r *runner) waitUntil(ctx context.Context, w time.Time) error {
	d := time.Until(w)
	if d <= 0 {
		return nil
	}
	if d > 20*time.Millisecond || time.Since(r.last) > 200*time.Millisecond {
		r.flush(true)
	}
	t := time.NewTimer(time.Until(w))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *runner) handle(ctx context.Context, e Event) error {
	switch e.Kind {
	case EvPhaseOpen:
		r.gpu.onPhase(e.Phase, true)
		r.b.openMarker(e.Phase)
	case EvPhaseClose:
		r.gpu.onPhase(e.Phase, false)
		r.b.phaseSpan(e.Phase)
	case EvSpan:
		r.b.trajSpan(e.Span, r.addr)
		r.engineTrace(e.Span)
	case EvMetrics:
		m := e.Metrics
		if r.live && r.opts.Speed != 1 {
			m = compressDurations(m, r.opts.Speed)
		}
		r.b.stepMetrics(e.T, m)
	case EvTopology:
		if r.live {
			if err := r.writeTargets(e.Topo); err != nil {
				return err
			}
			r.updateRouter()
		}
		r.b.topology(r.topo.Manager, e.T, e.Topo, r.topo, r.addr)
	case EvRunConfig:
		r.b.runConfig(r.topo.Train[0], e.T, e.Args)
	case EvEngine:
		r.gpu.onEngine(e.Engine, e.T)
		return r.engineEvent(ctx, e)
	case EvDumpRollout, EvDumpTrain, EvDumpEval:
		if r.dumps != nil {
			r.dumps <- e
		}
	}
	return nil
}

// dumpLoop writes the steps' dump files off the event loop (a step of a large run takes a second or more, which
// would otherwise stall the telemetry), in event order: a step's rollout dump before its train shards. A failure
// (disk full, say) stops the dumps, never the run's telemetry.
func (r *runner) dumpLoop(w *Dumper) {
	defer close(r.dumped)
	failed := false
	for e := range r.dumps {
		if failed {
			continue
		}
		var err error
		switch e.Kind {
		case EvDumpRollout, EvDumpEval:
			err = w.Rollout(e.Dump)
		default:
			err = w.Train(e.Dump)
		}
		if err != nil {
			failed = true
			r.rep.DumpError = fmt.Sprintf("step %d: %v", e.Dump.Step, err)
			fmt.Fprintf(r.opts.Log, "dumps: %s; no more dumps are written\n", r.rep.DumpError)
		}
	}
}

func (r *runner) engineEvent(ctx context.Context, e Event) error {
	ev := e.Engine
	if ev.Op == OpUp {
		if ev.Ref.Epoch == 0 {
			return nil
		}
		return r.engineUp(ev.Ref, e.T)
	}
	le := r.engs[ev.Ref]
	if le == nil {
		return nil
	}
	at := r.clock.At(e.T)
	switch ev.Op {
	case OpArrive:
		le.eng.Arrive(ev.Req.DP)
	case OpBegin:
		q := ev.Req
		le.eng.Begin(fakesglang.Request{
			ID: q.ID, DPRank: q.DP, PromptTokens: q.Prompt, CachedTokens: q.Cached, CompletionTokens: q.Completion,
			Submit: r.clock.At(q.Submit), Start: r.clock.At(q.Start), FirstToken: r.clock.At(q.FirstToken), End: r.clock.At(q.End),
		})
	case OpFinish:
		le.eng.Finish(ev.Req.ID, ev.Req.DP, at, ev.Aborted)
	case OpPause:
		le.eng.SetPaused(true)
	case OpResume:
		le.eng.SetPaused(false)
	case OpDown:
		if le.srv != nil {
			_ = le.srv.Shutdown(context.WithoutCancel(ctx))
		}
		delete(r.engs, ev.Ref)
		delete(r.alive, ev.Ref.Rank)
		r.updateRouter()
	}
	return nil
}

func (r *runner) engineUp(ref EngineRef, t float64) error {
	spec := r.topo.Engines[ref.Rank]
	cfg := r.gen.Config()
	wt := fakesglang.EngineUnified
	if spec.WorkerType == "prefill" || spec.WorkerType == "decode" {
		wt = spec.WorkerType
	}
	ecfg := fakesglang.Config{ModelName: cfg.Model, EngineType: wt, TPSize: len(spec.GPUs), MaxTotalNumTokens: cfg.Faults.KVPool}
	if cfg.Faults.DPImbalance > 0 {
		ecfg.DPSize = 2
	}
	eng := fakesglang.NewEngine(ecfg)
	le := &liveEngine{eng: eng, start: r.clock.At(t)}
	if r.live {
		var old string
		if prev, ok := r.alive[ref.Rank]; ok && r.engs[prev] != nil {
			old = r.engs[prev].addr
		}
		var ln net.Listener
		for range 20 { // a restarted engine comes back on a new port
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			if l.Addr().String() != old && l.Addr().String() != r.lastAddr(ref.Rank) {
				ln = l
				break
			}
			l.Close()
		}
		if ln == nil {
			return fmt.Errorf("no free port for engine %d", ref.Rank)
		}
		le.srv = fakesglang.ServeListener(eng, ln, nil)
		le.addr, le.url = le.srv.Addr(), le.srv.URL()
		fmt.Fprintf(r.opts.Log, "engine %d (incarnation %d) serving %s/metrics\n", ref.Rank, ref.Epoch, le.url)
	} else {
		le.addr = r.topo.Nodes[spec.Node] + ":" + strconv.Itoa(30000+spec.GPUs[0]*10+ref.Epoch)
		le.url = "http://" + le.addr
	}
	r.engs[ref] = le
	r.alive[ref.Rank] = ref
	r.urls[ref] = le.url
	return nil
}

func (r *runner) lastAddr(rank int) string {
	for ref, u := range r.urls {
		if ref.Rank == rank {
			return u[len("http://"):]
		}
	}
	return ""
}

// addr is the engine URL of an incarnation (also after it died: spans may end after the engine).
func (r *runner) addr(ref EngineRef) string {
	if u, ok := r.urls[ref]; ok {
		return u
	}
	return ""
}

func (r *runner) shutdownEngines(ctx context.Context) {
	if r.live { // deregister: the collector stops scraping engines that are gone
		_ = r.writeTargets(nil)
	}
	for _, le := range r.engs {
		if le.srv != nil {
			_ = le.srv.Shutdown(ctx)
		}
	}
	if r.rsrv != nil {
		_ = r.rsrv.Close()
	}
}

// writeTargets writes {run}/sglang_targets.json atomically in Prometheus file_sd form (docs/semconv.md §9).
func (r *runner) writeTargets(engines []TopoEngine) error {
	if r.opts.RunDir == "" {
		return nil
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	groups := []group{}
	for _, e := range engines {
		le := r.engs[e.Ref]
		if le == nil {
			continue
		}
		groups = append(groups, group{Targets: []string{le.addr}, Labels: map[string]string{"engine_rank": strconv.Itoa(e.Ref.Rank), "worker_type": e.WorkerType, "node": r.topo.Nodes[e.Node]}})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Labels["engine_rank"] < groups[j].Labels["engine_rank"] })
	data, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.opts.RunDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(r.opts.RunDir, "sglang_targets.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (r *runner) startRouter() error {
	r.router = &fakesglang.Router{Underscore: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.rsrv = &http.Server{Handler: r.router.Handler(nil), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.rsrv.Serve(ln) }()
	r.rep.RouterURL = "http://" + ln.Addr().String()
	fmt.Fprintf(r.opts.Log, "router serving %s/engine_metrics\n", r.rep.RouterURL)
	r.updateRouter()
	return nil
}

func (r *runner) updateRouter() {
	if r.router == nil {
		return
	}
	var ws []fakesglang.Worker
	for rank := 0; rank < len(r.topo.Engines); rank++ {
		if ref, ok := r.alive[rank]; ok {
			ws = append(ws, fakesglang.Worker{URL: r.engs[ref].url, Engine: r.engs[ref].eng})
		}
	}
	r.router.SetWorkers(ws)
}

func (r *runner) gpuTick(s, dt float64, procs bool) error {
	at := r.clock.At(s)
	for node, gs := range r.topo.GPUs {
		for _, g := range gs {
			smp, pm := r.gpu.sample(node, g.Index, s, dt)
			r.rep.GPUReadings++
			if r.live {
				r.b.gpu(r.nv, node, g.Index, at, &smp, r.topo.GPUMemory, pm, procs)
				continue
			}
			t, err := r.template(node, g.Index)
			if err != nil {
				return err
			}
			r.gpuBuf = t.append(r.gpuBuf, at, &smp, r.topo.GPUMemory)
			r.gpuN++
			r.rep.Points += gpuPoints
			if procs && len(pm) > 0 {
				procMetrics(r.nv, node, g.Index, at, pm, false).ResourceMetrics().MoveAndAppendTo(r.b.mets.ResourceMetrics())
				r.b.nPoints += len(pm)
			}
		}
	}
	return nil
}

func (r *runner) template(node, idx int) (*gpuTemplate, error) {
	if r.tmpl == nil {
		r.tmpl = make([][]*gpuTemplate, len(r.topo.GPUs))
		for n := range r.tmpl {
			r.tmpl[n] = make([]*gpuTemplate, len(r.topo.GPUs[n]))
		}
	}
	if t := r.tmpl[node][idx]; t != nil {
		return t, nil
	}
	t, err := newGPUTemplate(r.nv, node, idx, false)
	if err != nil {
		return nil, fmt.Errorf("gpu template: %w", err)
	}
	r.tmpl[node][idx] = t
	return t, nil
}

// scrapeTick (fast-forward) renders every live engine as the Prometheus receiver would deliver one scrape.
func (r *runner) scrapeTick(s float64) error {
	at := r.clock.At(s)
	for rank := 0; rank < len(r.topo.Engines); rank++ {
		ref, ok := r.alive[rank]
		if !ok {
			continue
		}
		le := r.engs[ref]
		fams := whitelisted(le.eng.Families(at))
		if le.tmpl == nil {
			t, n, err := newEngineTemplate(le.addr, le.start, relabeled(fams, le.url), fakesglang.Label{Name: "worker_addr", Value: le.url})
			if err != nil {
				return fmt.Errorf("engine template: %w", err)
			}
			le.tmpl, le.points = t, n
		}
		r.gpuBuf = le.tmpl.fill(r.gpuBuf, at, flattenSeries(fams))
		r.gpuN++
		r.rep.Points += int64(le.points)
	}
	return nil
}

// flush sends what is buffered: everything when force, else only signals past their batch size.
func (r *runner) flush(force bool) {
	b := r.b
	if b.nSpans > 0 && (force || b.nSpans >= 2048) {
		body, err := ptraceotlp.NewExportRequestFromTraces(b.traces).MarshalProto()
		if err == nil {
			r.snd.send("/v1/traces", body)
		}
		r.rep.Spans += int64(b.nSpans)
		b.resetTraces()
	}
	if b.nLogs > 0 && (force || b.nLogs >= 1024) {
		body, err := plogotlp.NewExportRequestFromLogs(b.logs).MarshalProto()
		if err == nil {
			r.snd.send("/v1/logs", body)
		}
		r.rep.Logs += int64(b.nLogs)
		b.resetLogs()
	}
	if b.nPoints > 0 && (force || b.nPoints >= 16384) {
		body, err := pmetricotlp.NewExportRequestFromMetrics(b.mets).MarshalProto()
		if err == nil {
			r.snd.send("/v1/metrics", body)
		}
		r.rep.Points += int64(b.nPoints)
		b.resetMetrics()
	}
	if r.gpuN > 0 && (force || len(r.gpuBuf) >= 2<<20) {
		r.snd.send("/v1/metrics", r.gpuBuf)
		r.gpuBuf, r.gpuN = make([]byte, 0, len(r.gpuBuf)+len(r.gpuBuf)/8), 0
	}
	if force {
		r.last = time.Now()
	}
}

// compressDurations rescales the trainer's perf/*_time metrics (seconds) by the live time compression: a run
// replayed at speed× is a run whose phases last 1/speed as long, and its timeline (timestamps) already is. Without
// this, perf/step_time would be in simulated seconds against wall-clock timestamps, and views that place a step at
// [ts - step_time, ts] (the bubble strip) would start it long before the run did.
func compressDurations(m *MetricsLog, speed float64) *MetricsLog {
	out := *m
	out.Vals = append([]float64(nil), m.Vals...)
	for i, k := range m.Keys {
		if strings.HasPrefix(k, "perf/") && strings.HasSuffix(k, "_time") {
			out.Vals[i] /= speed
		}
	}
	return &out
}
