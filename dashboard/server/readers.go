package server

import (
	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The server reads the run through one small interface per stream, holding only what its handlers and live
// streams call. *store.Store implements them all (Store); handler tests build a Server from fakes of the ones
// they need.

// runReader is the run as a whole: its description, data edge, time window and lane selection, and its change
// notifications.
type runReader interface {
	Meta() *store.MetaResult
	MetaVersion() uint64
	Info() store.RunInfo
	RunConfig() (*store.RunConfig, error)
	Dir() string
	Edge() float64
	Shards() []store.ShardStatus
	DataVersion() [6]uint64
	Window(t0, t1 *float64) (float64, float64, error)
	Lanes(sel string) ([]*store.Lane, int, error)
	Subscribe() chan struct{}
	Unsubscribe(c chan struct{})
}

// computeReader is the GPU samples and the phases of the ranks (the compute view).
type computeReader interface {
	Phases(t0, t1 float64, sel []*store.Lane) *store.PhasesResult
	PhaseDigests(key string, fn func(hour int64, recs store.PhaseHourRecords) any) ([]store.PhaseDigest, float64)
	GPU(t0, t1 float64, sel []*store.Lane, points int, fields []string) *store.GPUResult
	Fleet(t0, t1 float64, sel []*store.Lane, buckets int) *store.FleetResult
	Heatmap(t0, t1 float64, sel []*store.Lane, metric string, buckets int) (*store.HeatmapResult, error)
	Bubbles(t0, t1 float64) []store.Bubble
	StepPhases(t0, t1 float64, sel []*store.Lane) *store.StepPhasesResult
	Outliers(t0, t1 float64, sel []*store.Lane, k int) *store.OutliersResult
	Goodput(t0, t1 float64) *store.GoodputResult
	WeightSync(t0, t1 float64) *store.WeightSyncResult
	Explain(step, k int, memo *store.ExplainMemo) (*store.ExplainResult, error)
	ExplainTable(memo *store.ExplainMemo) *store.ExplainTable
	ExplainTableSoFar(memo *store.ExplainMemo) *store.ExplainTable
	SettleExplanations(memo *store.ExplainMemo, idle func() bool) (computed, left int)
}

// metricsReader is the step metrics the trainer logs.
type metricsReader interface {
	MetricKeys() ([]store.MetricKey, []string, uint64)
	MetricKeysSoFar() ([]store.MetricKey, []string, uint64, []string)
	MetricKeyNames() []string
	MetricSeries(keys []string, x0, x1 *float64, points int) []store.MetricSeriesResult
	StepMetricKeys() []store.MetricKey
	StepMetricSeries(keys ...string) map[string]store.StepSeries
	MetricsCursor() uint64
	MetricChangesSince(cursor uint64, limit int) ([]store.MetricChange, uint64, bool)
}

// engineReader is the inference engines' scraped series.
type engineReader interface {
	EngineOverlay(metric, stat string, t0, t1 float64, sel []*store.Lane, points int) (*store.EngineOverlayResult, error)
	EngineSeries(metric, stat string, perDP bool, t0, t1 float64, points int) (*store.EngineSeriesResult, error)
	EngineRawSeries(metric string, t0, t1 float64) []store.EngineRaw
	EngineDigests(key string, metrics []string, fn func(hour int64, raws map[string][]store.EngineRaw) any) []store.EngineDigest
	EngineHourRaw(metrics []string, hour int64) map[string][]store.EngineRaw
}

// trajectoryReader is the samples' lifecycle spans: consumed steps, a step's anatomy, the lifecycle carpet.
type trajectoryReader interface {
	LifecycleSteps() []store.StepSummary
	LifecycleStepsIfIndexed() ([]store.StepSummary, bool)
	Anatomy(step int, sortKey string, offset, limit int) (*store.AnatomyResult, error)
	LifecycleCarpet(t0, t1 float64, buckets, maxRows, offset int) *store.CarpetResult
	VersionPool(t0, t1 float64, points int) *store.PoolResult
}

// Store is everything the server reads from a run.
type Store interface {
	runReader
	computeReader
	metricsReader
	engineReader
	trajectoryReader
}

var _ Store = (*store.Store)(nil)

// dumpReader is the miles dump directories of the run (the step and sample pages).
type dumpReader interface {
	List() ([]dumps.StepFile, error)
	ListedSummary(f dumps.StepFile) *dumps.Summary
	Tokenizer() (*dumps.Tokenizer, error)
	Acquire(k dumps.StepKey) (*dumps.Step, func(), error)
}

var _ dumpReader = (*dumps.Reader)(nil)

// AdvisorySource is what the advisory reads from the store (AdvisoryInput).
type AdvisorySource interface {
	Info() store.RunInfo
	PhaseDigests(key string, fn func(hour int64, recs store.PhaseHourRecords) any) ([]store.PhaseDigest, float64)
	EngineDigests(key string, metrics []string, fn func(hour int64, raws map[string][]store.EngineRaw) any) []store.EngineDigest
	EngineHourRaw(metrics []string, hour int64) map[string][]store.EngineRaw
	MetricKeyNames() []string
	StepMetricSeries(keys ...string) map[string]store.StepSeries
	LifecycleSteps() []store.StepSummary
	Anatomy(step int, sortKey string, offset, limit int) (*store.AnatomyResult, error)
}

// readers puts the server's stream readers back together where one consumer reads several (the advisory).
type readers struct {
	runReader
	computeReader
	metricsReader
	engineReader
	trajectoryReader
}
