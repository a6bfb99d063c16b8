package lifecycleprocessor

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// options are test hooks; the factory passes the zero value.
type options struct {
	now         func() time.Time // default time.Now
	manualTicks bool             // no tickers: tests drive time with advance()
}

// lifecycleProcessor routes spans: pass-through spans go on at once, the facts of every trajectory span go to the
// worker owning its trace, generate and consume spans are held by that worker and step_consume spans by the
// step aggregator until they can be annotated (see doc.go for the arrow chain).
type lifecycleProcessor struct {
	cfg    *Config
	next   consumer.Traces
	logger *zap.Logger
	tel    *telemetry
	now    func() time.Time
	manual bool
	tick   time.Duration
	retain time.Duration // how long resolved samples are remembered (late spans, steps arriving after their samples)

	workers []*worker
	steps   *stepAggregator
	carry   *carryStore
	warn    warnings

	mu      sync.RWMutex // held for reading while dispatching; Start and Shutdown take it for writing
	running bool
	stopped bool
	wg      sync.WaitGroup
}

var _ processor.Traces = (*lifecycleProcessor)(nil)

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces, o options) (*lifecycleProcessor, error) {
	if next == nil {
		return nil, errors.New("nil next consumer")
	}
	p := &lifecycleProcessor{
		cfg:    cfg,
		next:   next,
		logger: set.Logger,
		now:    o.now,
		manual: o.manualTicks,
		tick:   min(max(cfg.WaitWindow/5, 10*time.Millisecond), time.Second),
		retain: max(10*cfg.WaitWindow, time.Minute),
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.logger == nil {
		p.logger = zap.NewNop()
	}
	tel, err := newTelemetry(set.MeterProvider)
	if err != nil {
		return nil, err
	}
	p.tel = tel
	p.carry = newCarryStore(cfg.MaxSamples, cfg.SampleTTL)
	perWorker := max(cfg.MaxSamples/cfg.NumWorkers, 1)
	for i := 0; i < cfg.NumWorkers; i++ {
		p.workers = append(p.workers, newWorker(p, perWorker))
	}
	p.steps = newStepAggregator(p)
	return p, nil
}

func (p *lifecycleProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// Start launches the workers and the step aggregator; it never blocks.
func (p *lifecycleProcessor) Start(ctx context.Context, _ component.Host) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.stopped {
		return nil
	}
	p.running = true
	// The goroutines outlive Start: they keep ctx's values (for their telemetry and the spans they release)
	// but not its cancellation.
	bg := context.WithoutCancel(ctx)
	for _, w := range p.workers {
		p.wg.Go(func() { w.run(bg, p.ticker()) })
	}
	p.wg.Go(func() { p.steps.run(bg, p.ticker()) })
	return nil
}

func (p *lifecycleProcessor) ticker() *time.Ticker {
	if p.manual {
		return nil
	}
	return time.NewTicker(p.tick)
}

// Shutdown releases every held span (annotated with what is known now) to the next consumer, which the collector
// shuts down after this processor, then stops the goroutines. It is safe without Start and idempotent.
func (p *lifecycleProcessor) Shutdown(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	if !p.running {
		return nil
	}
	p.running = false
	// Workers first: their consume results must reach the aggregator before it resolves the remaining steps.
	for _, w := range p.workers {
		done := make(chan struct{})
		w.ch <- flushEvent{done: done}
		<-done
	}
	done := make(chan struct{})
	p.steps.ch <- flushEvent{done: done}
	<-done
	for _, w := range p.workers {
		close(w.ch)
	}
	close(p.steps.ch)
	p.wg.Wait()
	p.warn.flush(p.logger)
	return nil
}

// advance moves a manually ticked processor to now: every worker, then the aggregator, handles its due work.
// Tests only.
func (p *lifecycleProcessor) advance(now time.Time) {
	for _, w := range p.workers {
		done := make(chan struct{})
		w.ch <- tickEvent{now: now, done: done}
		<-done
	}
	done := make(chan struct{})
	p.steps.ch <- tickEvent{now: now, done: done}
	<-done
}

// release hands annotated spans to the next consumer from a worker or the aggregator. The spans were accepted
// long ago, so an error cannot reach their sender: it is counted and logged (rate-limited).
func (p *lifecycleProcessor) release(ctx context.Context, td ptrace.Traces, held int) {
	if held == 0 {
		return
	}
	p.tel.heldSpans.Add(-int64(held))
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.tel.releaseError(ctx)
		p.warn.note("release", 1, p.now(), func(n int64) {
			p.logger.Warn("lifecycle: the next consumer refused annotated spans released after the wait window; they are lost",
				zap.Int64("refused_releases", n), zap.Error(err))
		})
	}
}

func kindOf(attrs pcommon.Map) lifecycle.Kind {
	v, ok := attrs.Get(sc.SpanType)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return lifecycle.KindOther
	}
	switch v.Str() {
	case sc.SpanTypeAttempt:
		return lifecycle.KindAttempt
	case sc.SpanTypeQueue:
		return lifecycle.KindQueue
	case sc.SpanTypeGenerate:
		return lifecycle.KindGenerate
	case sc.SpanTypeTool:
		return lifecycle.KindTool
	case sc.SpanTypeConsume:
		return lifecycle.KindConsume
	case sc.SpanTypeStepConsume:
		return lifecycle.KindStepConsume
	case sc.SpanTypeWeightUpdate:
		return lifecycle.KindWeightUpdate
	}
	return lifecycle.KindOther
}

// spanInfo is the typed fact a span contributes to its sample's state (the event payload).
type spanInfo struct {
	trace  pcommon.TraceID
	parent pcommon.SpanID // the span's parent: under an attempt, the attempt span
	lifecycle.Span
}

// heldGroup is spans of one resource and scope, from one ConsumeTraces call, held by one owner: they share a
// deadline and are released together. infos[i] describes span i of the group's only ScopeSpans.
type heldGroup struct {
	deadline time.Time
	rs       ptrace.ResourceSpans
	infos    []*spanInfo
	links    [][]lifecycle.TraceID // step groups: the linked sample traces of span i
}

func (g *heldGroup) spans() ptrace.SpanSlice { return g.rs.ScopeSpans().At(0).Spans() }

// dispatch collects what one ConsumeTraces call sends to whom.
type dispatch struct {
	p        *lifecycleProcessor
	deadline time.Time
	facts    [][]*spanInfo
	groups   [][]*heldGroup
	steps    []*heldGroup
	consumes []pcommon.TraceID
	updates  []lifecycle.WeightUpdate
	held     int
	invalid  int64      // trajectory spans with an all-zero trace or span id (passed on untouched)
	arena    []spanInfo // the facts of this call, allocated at once (pointers into it stay valid: never grown)
	// per (resource, scope): the open group of each worker and of the aggregator
	cur     []*heldGroup
	curStep *heldGroup
}

func (p *lifecycleProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	p.mu.RLock()
	if !p.running {
		p.mu.RUnlock()
		return p.next.ConsumeTraces(ctx, td)
	}
	n := len(p.workers)
	spans := td.SpanCount()
	d := &dispatch{
		p: p, deadline: p.now().Add(p.cfg.WaitWindow), facts: make([][]*spanInfo, n),
		groups: make([][]*heldGroup, n), cur: make([]*heldGroup, n), arena: make([]spanInfo, 0, spans),
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			clear(d.cur)
			d.curStep = nil
			ss.Spans().RemoveIf(func(span ptrace.Span) bool { return d.take(rs, ss, span) })
		}
	}
	d.send()
	p.mu.RUnlock()
	if d.invalid > 0 {
		p.tel.invalidIDs(ctx, d.invalid)
		p.warn.note("invalid_ids", d.invalid, p.now(), func(n int64) {
			p.logger.Warn("lifecycle: trajectory spans with an all-zero trace or span id passed on without joining a sample (docs/semconv.md §8.4)",
				zap.Int64("spans", n))
		})
	}
	if d.held > 0 {
		rss.RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool { return ss.Spans().Len() == 0 })
			return rs.ScopeSpans().Len() == 0
		})
		if rss.Len() == 0 {
			return nil
		}
	}
	return p.next.ConsumeTraces(ctx, td)
}

// shard picks the worker of a span: by its sample index when it has one (every span of an attempt, and every
// consume, carries miles.sample.index, docs/semconv.md §3), so a sample's attempts and its consume meet in one
// worker whichever trace and process the consume came from; by trace id otherwise. The remainder is below
// len(p.workers), so min never bites: it states that the conversion to int is exact.
func (p *lifecycleProcessor) shard(f *spanInfo) int {
	if f.HasSample {
		// Consecutive sample indices go round the workers; a negative index too (the remainder is made >= 0).
		n := int64(len(p.workers))
		return int(((f.Sample % n) + n) % n)
	}
	return int(min(binary.LittleEndian.Uint64(f.trace[8:])%uint64(len(p.workers)), math.MaxInt))
}

// take records the span's facts and reports whether the span is held (moved out of td).
func (d *dispatch) take(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) bool {
	attrs := span.Attributes()
	k := kindOf(attrs)
	if k == lifecycle.KindOther {
		return false
	}
	if span.TraceID().IsEmpty() || span.SpanID().IsEmpty() {
		// OTLP calls all-zero ids invalid: every such span would join one sample state (one trace id) or one
		// segment (one span id), mixing unrelated samples. It passes on untouched; the exporter drops it
		// (docs/semconv.md §8.4).
		d.invalid++
		return false
	}
	switch k {
	case lifecycle.KindWeightUpdate:
		if v, ok := attrInt(attrs, sc.WeightVersion); ok {
			d.updates = append(d.updates, lifecycle.WeightUpdate{Version: v, End: unixNano(span.EndTimestamp())})
		}
		return false
	case lifecycle.KindStepConsume:
		if d.curStep == nil {
			d.curStep = newGroup(rs, ss, d.deadline)
			d.steps = append(d.steps, d.curStep)
		}
		g := d.curStep
		var links []lifecycle.TraceID
		for _, l := range span.Links().All() {
			links = append(links, lifecycle.TraceID(l.TraceID()))
		}
		g.links = append(g.links, links)
		g.infos = append(g.infos, d.info(spanInfo{trace: span.TraceID(), Span: lifecycle.Span{Kind: k, Span: lifecycle.SpanID(span.SpanID())}}))
		span.MoveTo(g.spans().AppendEmpty())
		d.held++
		return true
	}
	info := d.info(spanInfo{trace: span.TraceID(), parent: span.ParentSpanID(), Span: spanFact(k, span)})
	if k == lifecycle.KindConsume {
		d.consumes = append(d.consumes, info.trace)
	}
	w := d.p.shard(info)
	if d.facts[w] == nil {
		d.facts[w] = make([]*spanInfo, 0, cap(d.arena)/len(d.facts)+8)
	}
	d.facts[w] = append(d.facts[w], info)
	if k != lifecycle.KindGenerate && k != lifecycle.KindConsume {
		return false
	}
	g := d.cur[w]
	if g == nil {
		g = newGroup(rs, ss, d.deadline)
		d.cur[w] = g
		d.groups[w] = append(d.groups[w], g)
	}
	g.infos = append(g.infos, info)
	span.MoveTo(g.spans().AppendEmpty())
	d.held++
	return true
}

// unixNano is t as the int64 Unix nanoseconds the lifecycle computes with. A time past 2262 (over MaxInt64 ns)
// clamps to the largest: no real span has one, the exporter drops such a span (out_of_window, docs/semconv.md
// §8.4), and clamping keeps the order of a span's times where the conversion would wrap them to before 1970.
func unixNano(t pcommon.Timestamp) int64 { return int64(min(t, math.MaxInt64)) }

// spanFact reads the lifecycle facts of one attempt, queue, generate, tool or consume span (docs/semconv.md §3).
func spanFact(k lifecycle.Kind, span ptrace.Span) lifecycle.Span {
	attrs := span.Attributes()
	f := lifecycle.Span{
		Kind: k, Span: lifecycle.SpanID(span.SpanID()), Start: unixNano(span.StartTimestamp()), End: unixNano(span.EndTimestamp()),
	}
	f.Sample, f.HasSample = attrInt(attrs, sc.SampleIndex)
	f.Attempt, f.HasAttempt = attrInt(attrs, sc.Attempt)
	switch k {
	case lifecycle.KindAttempt:
		if v, ok := attrs.Get(sc.SampleStatus); ok {
			f.Status = v.AsString()
		}
	case lifecycle.KindGenerate:
		f.Turn, f.HasTurn = attrInt(attrs, sc.Turn)
		f.Version, f.HasVersion = attrInt(attrs, sc.WeightVersion)
		f.TokOut, f.HasTokOut = attrInt(attrs, sc.TokensCompletion)
	case lifecycle.KindTool:
		f.Turn, f.HasTurn = attrInt(attrs, sc.Turn)
		f.ToolCalls, f.HasToolCalls = attrInt(attrs, sc.ToolCalls)
	case lifecycle.KindConsume:
		f.Version, f.HasVersion = attrInt(attrs, sc.WeightVersion)
	}
	return f
}

// info stores f in the call's arena (sized to the span count, so it never moves).
func (d *dispatch) info(f spanInfo) *spanInfo {
	if len(d.arena) == cap(d.arena) { // cannot happen: one fact per span at most
		p := new(spanInfo)
		*p = f
		return p
	}
	d.arena = append(d.arena, f)
	return &d.arena[len(d.arena)-1]
}

func newGroup(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, deadline time.Time) *heldGroup {
	g := &heldGroup{deadline: deadline, rs: ptrace.NewResourceSpans()}
	rs.Resource().CopyTo(g.rs.Resource())
	g.rs.SetSchemaUrl(rs.SchemaUrl())
	dst := g.rs.ScopeSpans().AppendEmpty()
	ss.Scope().CopyTo(dst.Scope())
	dst.SetSchemaUrl(ss.SchemaUrl())
	return g
}

// send delivers the collected facts. Order matters only for the aggregator: it learns that a consume is pending
// before any worker can resolve it.
func (d *dispatch) send() {
	p := d.p
	p.tel.heldSpans.Add(int64(d.held))
	if len(d.consumes) > 0 {
		p.steps.ch <- consumesArrived{traces: d.consumes, at: d.deadline.Add(-p.cfg.WaitWindow)}
	}
	for _, u := range d.updates {
		for _, w := range p.workers {
			w.ch <- u
		}
	}
	for i, w := range p.workers {
		if len(d.facts[i]) > 0 || len(d.groups[i]) > 0 {
			w.ch <- factsEvent{facts: d.facts[i], groups: d.groups[i]}
		}
	}
	if len(d.steps) > 0 {
		p.steps.ch <- stepsArrived{groups: d.steps}
	}
}

// attrInt reads an integer attribute sent as int, as an integral double, or as a decimal string (sglang reports
// weight_version as a string).
func attrInt(m pcommon.Map, key string) (int64, bool) {
	v, ok := m.Get(key)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<53 {
			return int64(f), true
		}
	case pcommon.ValueTypeStr:
		if n, err := strconv.ParseInt(strings.TrimSpace(v.Str()), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// clearLifecycle removes annotations a previous lifecycle processor may have left, so a span never mixes two.
func clearLifecycle(m pcommon.Map) {
	for k := range m.All() {
		if strings.HasPrefix(k, lifecyclePrefix) {
			m.RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, lifecyclePrefix) })
			return
		}
	}
}

const lifecyclePrefix = "miles.lifecycle."

// warnings rate-limits the actionable log lines: per kind, at most one line a minute, carrying the count since
// the previous line.
type warnings struct {
	mu      sync.Mutex
	last    map[string]time.Time
	pending map[string]int64
	emit    map[string]func(int64)
}

func (w *warnings) note(kind string, n int64, now time.Time, emit func(total int64)) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	if w.last == nil {
		w.last, w.pending, w.emit = map[string]time.Time{}, map[string]int64{}, map[string]func(int64){}
	}
	w.pending[kind] += n
	w.emit[kind] = emit
	total := w.pending[kind]
	due := now.Sub(w.last[kind]) >= time.Minute
	if due {
		w.last[kind] = now
		w.pending[kind] = 0
	}
	w.mu.Unlock()
	if due {
		emit(total)
	}
}

// flush logs what is still pending (at shutdown).
func (w *warnings) flush(*zap.Logger) {
	w.mu.Lock()
	var todo []func()
	for k, n := range w.pending {
		if n > 0 {
			emit := w.emit[k]
			todo = append(todo, func() { emit(n) })
			w.pending[k] = 0
		}
	}
	w.mu.Unlock()
	for _, f := range todo {
		f()
	}
}
