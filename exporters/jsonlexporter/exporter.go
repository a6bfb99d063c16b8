package jsonlexporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// jsonlExporter is the one instance shared by the traces, metrics and logs pipelines of a component ID.
//
//	push{Traces,Metrics,Logs} → map*(pdata) → records → catalog.fold + writer.enqueue → (flush goroutine) files
type jsonlExporter struct {
	cfg     *Config
	logger  *zap.Logger
	version string
	tel     *telemetry
	fs      fileSystem
	now     func() time.Time

	mu      sync.Mutex
	refs    int // started signals; the last Shutdown stops the writer
	started bool
	stopped bool

	w    *writer
	cat  *laneCatalog
	cmp  *compactor
	roll *rollup // nil when rollup_interval is 0

	limits limitWarner   // over-limit drops, logged at most once a minute
	engine *engineFilter // the engine_traces stream's filter (nil when off)
	keys   metricKeys    // the step-metric keys written (limits.go)
}

func newExporter(cfg *Config, set component.TelemetrySettings, version string) (*jsonlExporter, error) {
	tel, err := newTelemetry(set.MeterProvider)
	if err != nil {
		return nil, err
	}
	e := &jsonlExporter{cfg: cfg, logger: set.Logger, version: version, tel: tel, fs: osFS{}, now: time.Now}
	e.engine = newEngineFilter(cfg.EngineTraces, func() time.Time { return e.now() })
	return e, nil
}

func (e *jsonlExporter) start(ctx context.Context, _ component.Host) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refs++
	if e.started {
		return nil
	}
	dash := e.cfg.layoutRoot()
	runName := e.cfg.RunName
	if runName == "" {
		runName = filepath.Base(filepath.Clean(e.cfg.Directory))
	}
	// A full or read-only disk does not stop the start (startup.go): meta.json is retried every flush.
	meta := &metaWriter{dash: dash, runName: runName, shard: e.cfg.Shard, version: e.version, started: e.now()}
	if err := meta.write(); err != nil {
		logStartProblem(e.logger, "cannot write the run directory", err)
	}
	if e.cfg.RollupInterval > 0 {
		e.roll = newRollup(int64(e.cfg.RollupInterval / time.Second))
	}
	e.cat = newLaneCatalog(dash)
	if skipped, err := e.cat.load(e.now()); err != nil {
		e.logger.Warn("jsonl: ignoring unreadable lane catalog", zap.Error(err))
	} else if skipped > 0 {
		e.logger.Warn("jsonl: the lane catalog held lanes over the ingest limits (docs/semconv.md §8.4); they are dropped and the catalog rewritten",
			zap.Int("lanes_dropped", skipped), zap.Int("max_lanes", maxLanes))
	}
	part := newPartitioner(dash, e.fs, e.cfg.MaxOpenFiles, e.cfg.Fsync)
	if meta.done { // the disk takes writes: cut what a crash left before anything reads or appends
		cut, err := repairRunDir(dash, part)
		if err != nil {
			e.logger.Warn("jsonl: could not repair every partition left by the last run; each is repaired when next written", zap.Error(err))
		}
		if cut > 0 {
			e.logger.Info("jsonl: cut torn tails left by a crash", zap.Int64("bytes", cut))
		}
	}
	e.w = &writer{
		maxBytes: e.cfg.MaxBufferBytes,
		part:     part,
		interval: e.cfg.FlushInterval,
		logger:   e.logger,
		tel:      e.tel,
		now:      func() time.Time { return e.now() },
	}
	e.w.afterFlush = func() error {
		if err := meta.write(); err != nil {
			return err // the catalog waits for its directory too
		}
		return e.cat.writeIfChanged()
	}
	if e.roll != nil {
		// Continue the buckets a crash cut where the files end (rollup_restore.go).
		var r records
		n, err := e.roll.restore(dash, &r)
		if err != nil {
			e.logger.Warn("jsonl: could not read every partition the roll-up resumes from; the buckets open at the last stop may be written partial", zap.Error(err))
		}
		if n > 0 {
			e.logger.Info("jsonl: roll-up resumed from the files", zap.Int("readings", n))
		}
		e.w.enqueue(ctx, r.chunks)
	}
	if e.cfg.Compression == "zstd" {
		cmp, err := newCompactor(dash, e.cfg.CompressAfter, part, func(err error) { e.w.reportError(e.now(), err, 0) })
		if err != nil {
			return err
		}
		cmp.seedRecent(e.now())
		e.cmp = cmp
		e.w.cmp = cmp
	}
	// The writer outlives start: it keeps ctx's values for its telemetry but not its cancellation.
	e.w.start(context.WithoutCancel(ctx))
	e.started = true
	return nil
}

// shutdown is safe without start; the last signal's shutdown flushes everything and closes the files.
func (e *jsonlExporter) shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs > 0 {
		e.refs--
	}
	if e.refs > 0 || !e.started || e.stopped {
		return nil
	}
	e.stopped = true
	if e.roll != nil {
		var r records
		e.roll.flushAll(&r)
		e.w.enqueue(ctx, r.chunks)
	}
	err := e.w.shutdown(ctx)
	if e.cmp != nil {
		e.cmp.close()
	}
	e.limits.flush(e.logger)
	if e.tel.droppedTotal() > 0 || e.w.pendingBytes > 0 {
		e.logger.Warn("jsonl: shut down with data lost", zap.Int64("records_dropped_total", e.tel.droppedTotal()),
			zap.Int64("unwritten_bytes", e.w.pendingBytes))
	}
	return err
}

var errStopped = consumererror.NewPermanent(errors.New("jsonl exporter is not running"))

// accept hands one export's records to the catalog and the writer; it never touches the disk.
func (e *jsonlExporter) accept(ctx context.Context, r *records) error {
	if r.eng.rate > 0 {
		return e.refuseOverRate(ctx, r)
	}
	if r.unmapped > 0 {
		e.tel.dropped(ctx, dropReasonUnmapped, r.unmapped)
	}
	if r.invalid > 0 {
		e.tel.dropped(ctx, dropReasonInvalid, r.invalid)
	}
	if r.outside > 0 {
		e.tel.dropped(ctx, dropReasonTimeWindow, r.outside)
		e.limits.note(e.logger, e.now(), r.outside, "record time outside the accepted window (max_past "+e.cfg.MaxPast.String()+", max_future "+e.cfg.MaxFuture.String()+")")
	}
	e.countEngine(ctx, r.eng)
	if r.over > 0 {
		e.tel.dropped(ctx, dropReasonOverLimit, r.over)
		e.limits.note(e.logger, e.now(), r.over, r.overWhat)
	}
	e.mu.Lock()
	running := e.started && !e.stopped
	e.mu.Unlock()
	if !running {
		return errStopped
	}
	refused, evicted := e.cat.foldFrom(r.lanes, clientOf(ctx), e.now())
	if evicted > 0 {
		e.tel.lanesEvicted(ctx, evicted)
	}
	if refused > 0 {
		e.tel.dropped(ctx, dropReasonOverLimit, refused)
		e.limits.note(e.logger, e.now(), refused, "lane catalog: full ("+strconv.Itoa(maxLanes)+" lanes, "+
			strconv.Itoa(maxLanesPerClient)+" a client)")
	}
	if e.roll != nil && e.cfg.Ack == ackWritten {
		// The roll-up's lines are the exporter's own (buckets of many exports): queued, not withdrawn with this
		// export if it is refused. Queued first, they go out with the flush this export waits for.
		var own records
		e.roll.fold(r.gpus, &own)
		e.w.enqueue(ctx, own.chunks)
	} else if e.roll != nil {
		e.roll.fold(r.gpus, r)
	}
	if e.cfg.Ack == ackWritten {
		return e.w.enqueueAndWait(ctx, r.chunks)
	}
	e.w.enqueue(ctx, r.chunks)
	return nil
}

func (e *jsonlExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	r := e.newRecords()
	r.engine = e.engine
	mapTraces(td, &r)
	return e.accept(ctx, &r)
}

func (e *jsonlExporter) pushMetrics(ctx context.Context, md pmetric.Metrics) error {
	r := e.newRecords()
	mapMetrics(md, &r)
	return e.accept(ctx, &r)
}

func (e *jsonlExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	r := e.newRecords()
	mapLogs(ld, &r)
	return e.accept(ctx, &r)
}

// refuseOverRate refuses a request whose engine spans the rate cap cannot take now (engine_traces.
// max_spans_per_second): nothing of it is written or counted but the refusal, and the error is retryable
// ResourceExhausted with the wait in a RetryInfo, which the OTLP receiver answers as 429 with Retry-After and
// which the OTLP exporters of agents retry after that delay (docs/reliability.md "Gateway restarted with a
// backlog").
func (e *jsonlExporter) refuseOverRate(ctx context.Context, r *records) error {
	for _, c := range r.chunks {
		putBuf(c.data)
		c.data = nil
	}
	e.tel.refusedWrite(ctx, r.eng.rate)
	wait := max(r.eng.wait, 100*time.Millisecond)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("jsonl: %d engine spans over engine_traces.max_spans_per_second (%d); retry in %s",
		r.eng.rate, e.cfg.EngineTraces.MaxSpansPerSecond, wait.Round(time.Millisecond)))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// clientOf names the client of a request by its peer's IP address (the receivers put it in the context); ""
// when unknown (a scrape, a test).
func clientOf(ctx context.Context) string {
	addr := client.FromContext(ctx).Addr
	if addr == nil {
		return ""
	}
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	case *net.IPAddr:
		return a.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}
