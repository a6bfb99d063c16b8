package jsonlexporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
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

func (e *jsonlExporter) start(_ context.Context, _ component.Host) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refs++
	if e.started {
		return nil
	}
	dash := filepath.Join(e.cfg.Directory, runfiles.DashboardDir)
	if err := os.MkdirAll(dash, 0o755); err != nil {
		return fmt.Errorf("jsonl: cannot create the run directory %s: %w", dash, err)
	}
	runName := e.cfg.RunName
	if runName == "" {
		runName = filepath.Base(filepath.Clean(e.cfg.Directory))
	}
	if err := writeMeta(dash, runName, e.version, e.now()); err != nil {
		return fmt.Errorf("jsonl: cannot write meta.json in %s: %w", dash, err)
	}
	if e.cfg.RollupInterval > 0 {
		e.roll = newRollup(int64(e.cfg.RollupInterval / time.Second))
	}
	e.cat = newLaneCatalog(dash)
	if skipped, err := e.cat.load(); err != nil {
		e.logger.Warn("jsonl: ignoring unreadable lane catalog", zap.Error(err))
	} else if skipped > 0 {
		e.logger.Warn("jsonl: the lane catalog held lanes over the ingest limits (docs/semconv.md §8.4); they are dropped and the catalog rewritten",
			zap.Int("lanes_dropped", skipped), zap.Int("max_lanes", maxLanes))
	}
	part := newPartitioner(dash, e.fs, e.cfg.MaxOpenFiles, e.cfg.Fsync)
	e.w = &writer{
		maxBytes: e.cfg.MaxBufferBytes,
		part:     part,
		interval: e.cfg.FlushInterval,
		logger:   e.logger,
		tel:      e.tel,
		now:      func() time.Time { return e.now() },
	}
	e.w.afterFlush = func() {
		if err := e.cat.writeIfChanged(); err != nil {
			e.w.reportError(e.now(), err, 0)
		}
	}
	if e.cfg.Compression == "zstd" {
		cmp, err := newCompactor(e.cfg.Directory, e.cfg.CompressAfter, part, func(err error) { e.w.reportError(e.now(), err, 0) })
		if err != nil {
			return err
		}
		e.cmp = cmp
		e.w.cmp = cmp
	}
	e.w.start()
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
		e.w.enqueue(r.chunks)
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
func (e *jsonlExporter) accept(r *records) error {
	if r.unmapped > 0 {
		e.tel.dropped(dropReasonUnmapped, r.unmapped)
	}
	if r.invalid > 0 {
		e.tel.dropped(dropReasonInvalid, r.invalid)
	}
	e.countEngine(r.eng)
	if r.over > 0 {
		e.tel.dropped(dropReasonOverLimit, r.over)
		e.limits.note(e.logger, e.now(), r.over, r.overWhat)
	}
	e.mu.Lock()
	running := e.started && !e.stopped
	e.mu.Unlock()
	if !running {
		return errStopped
	}
	if refused := e.cat.fold(r.lanes); refused > 0 {
		e.tel.dropped(dropReasonOverLimit, refused)
		e.limits.note(e.logger, e.now(), refused, "lane catalog: full ("+strconv.Itoa(maxLanes)+" lanes)")
	}
	if e.roll != nil {
		e.roll.fold(r.gpus, r)
	}
	e.w.enqueue(r.chunks)
	return nil
}

func (e *jsonlExporter) pushTraces(_ context.Context, td ptrace.Traces) error {
	r := records{engine: e.engine}
	mapTraces(td, &r)
	return e.accept(&r)
}

func (e *jsonlExporter) pushMetrics(_ context.Context, md pmetric.Metrics) error {
	var r records
	mapMetrics(md, &r)
	return e.accept(&r)
}

func (e *jsonlExporter) pushLogs(_ context.Context, ld plog.Logs) error {
	var r records
	mapLogs(ld, &r)
	return e.accept(&r)
}
