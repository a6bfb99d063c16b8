// Package fakesglang is a fake sglang engine for tests and the run simulator: it serves /metrics exposition text
// in sglang's real format (colon names, scheduler labels engine_type/model_name/moe_ep_rank/pp_rank/tp_rank/dp_rank,
// gauges, counters, histograms with sglang's default bucket bounds, PD-disaggregation queue gauges on prefill and
// decode engines, per-stage request latencies, retraction and speculative-decoding metrics, one scheduler series
// per dp rank and pipeline stage) whose values follow the requests the caller feeds it, and a fake router that
// concatenates
// workers under /engine_metrics with a worker_addr label, as sgl-model-gateway does.
//
// Names, labels and buckets follow sglang 0.5.23's srt/observability/metrics_collector.py; e2e/sglang_real_fake_e2e_test.go
// holds them against that code's own output (docs/semconv.md §7, "Real sglang fixtures").
// The engine keeps no clock of its own: every event and every snapshot carries its time, so the same engine serves
// a live run (wall clock) and a fast-forwarded one (synthetic timestamps).
package fakesglang

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Engine types (the engine_type label).
const (
	EngineUnified = "unified"
	EnginePrefill = "prefill"
	EngineDecode  = "decode"
)

// Default histogram bounds of sglang's TokenizerMetricsCollector and SchedulerMetricsCollector.
var (
	BucketsTTFT = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	BucketsE2E  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	BucketsITL  = []float64{
		0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
		0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
	}
	// BucketsKVTransfer are sglang 0.5.23's bounds of kv_transfer_speed_gb_s, kv_transfer_latency_ms,
	// kv_transfer_bootstrap_ms, kv_transfer_alloc_ms and kv_transfer_total_mb, in that order.
	BucketsKVTransfer = [5][]float64{
		{0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400},
		{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000},
		{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500},
		{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500},
		{1, 5, 10, 50, 100, 500, 1000, 5000, 10000},
	}
	BucketsQueue = []float64{
		0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200,
		300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
	}
	// BucketsStage are per_stage_req_latency_seconds' bounds: exponential_buckets(start=0.001, width=1.62,
	// length=30), 1 ms to ~1191 s, as Python computes them (0.001 * 1.62**i; Go's math.Pow rounds some
	// differently, and the bounds are compared exactly).
	BucketsStage = []float64{
		0.001, 0.0016200000000000001, 0.0026244000000000007, 0.004251528, 0.006887475360000002,
		0.011157710083200004, 0.018075490334784006, 0.029282294342350097, 0.047437316834607154,
		0.07684845327206359, 0.12449449430074302, 0.20168108076720373, 0.3267233508428701, 0.5292918283654495,
		0.8574527619520282, 1.389073474362286, 2.2502990284669036, 3.6454844261163837, 5.905684770308542,
		9.567209327899839, 15.49887911119774, 25.10818416014034, 40.67525833942735, 65.89391850987231,
		106.74814798599316, 172.93199973730896, 280.1498395744405, 453.84274011059364, 735.2252389791618,
		1191.064887146242,
	}
)

// Request stages (the stage label of per_stage_req_latency_seconds, sglang's RequestStage values) that the fake
// observes: waiting, prefill forward and decode loop on unified engines; bootstrap, forward and KV transfer on
// prefill engines; transfer wait and decode loop on decode engines.
const (
	StagePrefillWaiting  = "prefill_waiting"
	StagePrefillForward  = "prefill_forward"
	StageDecodeLoop      = "decode_loop"
	StagePrefillBoot     = "prefill_bootstrap"
	StagePrefillTransfer = "prefill_transfer_kv_cache"
	StageDecodeWaiting   = "decode_waiting"
)

// Config describes one engine (one sglang server).
type Config struct {
	ModelName  string // model_name label; default "Qwen/Qwen3-30B-A3B"
	EngineType string // unified (default), prefill or decode
	TPSize     int    // tensor-parallel size (default 1)
	DPSize     int    // data-parallel (attention) ranks, one scheduler series each (default 1)
	PPSize     int    // pipeline stages: every stage's scheduler reports its own series, labeled pp_rank (default 1)
	// Speculative: speculative decoding on (spec_accept_rate/length report an acceptance; 0 otherwise, as sglang).
	Speculative bool
	// MaxTotalNumTokens is the KV pool size per dp rank (default 400000).
	MaxTotalNumTokens int
	// StartupSeconds and LoadWeightsSeconds are reported by the startup gauges.
	StartupSeconds, LoadWeightsSeconds float64
}

func (c *Config) defaults() {
	if c.ModelName == "" {
		c.ModelName = "Qwen/Qwen3-30B-A3B"
	}
	if c.EngineType == "" {
		c.EngineType = EngineUnified
	}
	if c.TPSize <= 0 {
		c.TPSize = 1
	}
	if c.DPSize <= 0 {
		c.DPSize = 1
	}
	if c.PPSize <= 0 {
		c.PPSize = 1
	}
	if c.MaxTotalNumTokens <= 0 {
		c.MaxTotalNumTokens = 400000
	}
	if c.StartupSeconds <= 0 {
		c.StartupSeconds = 41.7
	}
	if c.LoadWeightsSeconds <= 0 {
		c.LoadWeightsSeconds = 12.3
	}
}

// Request is one generate call as the engine sees it. Times are absolute; Begin is called at Start, End at End.
type Request struct {
	ID               uint64
	DPRank           int
	PromptTokens     int
	CachedTokens     int // prefix-cache hits among PromptTokens
	CompletionTokens int
	Submit           time.Time // arrival at the tokenizer (queue entry)
	Start            time.Time // scheduled into the running batch
	FirstToken       time.Time
	End              time.Time // planned finish (may be cut short by an abort)
}

type hist struct {
	bounds  []float64
	buckets []float64 // cumulative
	count   float64
	sum     float64
}

func newHist(b []float64) *hist { return &hist{bounds: b, buckets: make([]float64, len(b))} }

func (h *hist) observe(v float64) {
	for i, ub := range h.bounds {
		if v <= ub {
			h.buckets[i]++
		}
	}
	h.count++
	h.sum += v
}

type rankState struct {
	queued   int
	running  map[uint64]*Request
	cacheEW  float64 // EWMA of the prefix cache hit rate
	queueH   *hist
	stageH   map[string]*hist // per_stage_req_latency_seconds by stage
	retained int              // tokens of finished requests kept in the radix cache

	retractedReqs, retractedIn, retractedOut float64 // cumulative
	lastRetracted                            int     // retracted in the last step (the num_retracted_reqs gauge)
	// lastThroughput is gen_throughput as last reported: sglang refreshes the gauge from its decode-batch log, so
	// while a weight sync pauses decoding the gauge keeps its last value rather than dropping to 0.
	lastThroughput             float64
	bootFailed, transferFailed float64 // PD failure counters
}

func (rs *rankState) observeStage(stage string, d time.Duration) {
	h := rs.stageH[stage]
	if h == nil {
		h = newHist(BucketsStage)
		rs.stageH[stage] = h
	}
	h.observe(d.Seconds())
}

// Engine is the metric state of one fake sglang server. It is safe for concurrent use.
type Engine struct {
	mu     sync.Mutex
	cfg    Config
	ranks  []*rankState
	paused bool

	promptTotal, genTotal, cachedTotal, reqTotal, abortTotal float64
	ttft, itl, e2e                                           *hist
	kvSpeed, kvLatency, kvBoot, kvAlloc, kvMB                float64
	// kvH: the KV-transfer histograms of a PD engine (speed, latency, bootstrap, alloc, total MB), one
	// observation per transfer, as sglang's observe_kv_transfer_metrics records them.
	kvH [5]*hist
}

// NewEngine returns an idle engine.
func NewEngine(cfg Config) *Engine {
	cfg.defaults()
	e := &Engine{cfg: cfg, ttft: newHist(BucketsTTFT), itl: newHist(BucketsITL), e2e: newHist(BucketsE2E)}
	for i := 0; i < cfg.DPSize; i++ {
		rs := &rankState{running: map[uint64]*Request{}, queueH: newHist(BucketsQueue), cacheEW: 0.35, stageH: map[string]*hist{}}
		// Every stage the engine type passes through is exposed from the start (at zero), so the family set of a
		// scrape does not change with load (the simulator encodes engines from one template).
		for _, st := range stagesOf(cfg.EngineType) {
			rs.stageH[st] = newHist(BucketsStage)
		}
		e.ranks = append(e.ranks, rs)
	}
	return e
}

func stagesOf(engineType string) []string {
	switch engineType {
	case EnginePrefill:
		return []string{StagePrefillBoot, StagePrefillForward, StagePrefillTransfer}
	case EngineDecode:
		return []string{StageDecodeWaiting, StageDecodeLoop}
	}
	return []string{StagePrefillWaiting, StagePrefillForward, StageDecodeLoop}
}

// Config returns the engine's configuration (with defaults applied).
func (e *Engine) Config() Config { return e.cfg }

func (e *Engine) rank(dp int) *rankState {
	if dp < 0 || dp >= len(e.ranks) {
		dp = 0
	}
	return e.ranks[dp]
}

// Arrive records a request entering the engine's waiting queue.
func (e *Engine) Arrive(dp int) {
	e.mu.Lock()
	e.rank(dp).queued++
	e.mu.Unlock()
}

// Begin moves a request from the waiting queue into the running batch.
func (e *Engine) Begin(r Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.rank(r.DPRank)
	if rs.queued > 0 {
		rs.queued--
	}
	rc := r
	rs.running[r.ID] = &rc
	rs.queueH.observe(r.Start.Sub(r.Submit).Seconds())
	switch e.cfg.EngineType {
	case EnginePrefill:
		rs.observeStage(StagePrefillBoot, r.Start.Sub(r.Submit))
	case EngineDecode:
		rs.observeStage(StageDecodeWaiting, r.Start.Sub(r.Submit))
	default:
		rs.observeStage(StagePrefillWaiting, r.Start.Sub(r.Submit))
	}
	if r.PromptTokens > 0 {
		rs.cacheEW = 0.9*rs.cacheEW + 0.1*float64(r.CachedTokens)/float64(r.PromptTokens)
	}
}

// Finish ends a running request at time at. aborted requests count in num_aborted_requests_total; their
// completion tokens are those generated until at.
func (e *Engine) Finish(id uint64, dp int, at time.Time, aborted bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.rank(dp)
	r, ok := rs.running[id]
	if !ok {
		return
	}
	delete(rs.running, id)
	out := r.CompletionTokens
	if aborted {
		out = generatedAt(r, at)
		e.abortTotal++
	}
	e.reqTotal++
	e.promptTotal += float64(r.PromptTokens)
	e.cachedTotal += float64(r.CachedTokens)
	e.genTotal += float64(out)
	e2e := at.Sub(r.Submit).Seconds()
	e.e2e.observe(e2e)
	if !r.FirstToken.After(at) {
		switch e.cfg.EngineType {
		case EnginePrefill:
			rs.observeStage(StagePrefillForward, r.FirstToken.Sub(r.Start))
			rs.observeStage(StagePrefillTransfer, at.Sub(r.FirstToken))
		case EngineDecode:
			rs.observeStage(StageDecodeLoop, at.Sub(r.FirstToken))
		default:
			rs.observeStage(StagePrefillForward, r.FirstToken.Sub(r.Start))
			rs.observeStage(StageDecodeLoop, at.Sub(r.FirstToken))
		}
		e.ttft.observe(r.FirstToken.Sub(r.Submit).Seconds())
		if out > 1 {
			e.itl.observe(at.Sub(r.FirstToken).Seconds() / float64(out-1))
		}
	}
	rs.retained = min(rs.retained+r.PromptTokens+out, e.cfg.MaxTotalNumTokens/3)
	if e.cfg.EngineType != EngineUnified {
		// One KV transfer per request: speed and latency of the last one, as sglang's gauges report.
		mb := float64(r.PromptTokens) * 0.12
		e.kvSpeed = 18 + 6*math.Sin(float64(e.reqTotal)*0.37)
		e.kvLatency = mb / e.kvSpeed
		e.kvBoot = 2.5 + math.Mod(float64(e.reqTotal)*0.7, 1.5)
		e.kvAlloc = 0.4 + math.Mod(float64(e.reqTotal)*0.3, 0.6)
		e.kvMB = mb
		for i, v := range []float64{e.kvSpeed, e.kvLatency, e.kvBoot, e.kvAlloc, e.kvMB} {
			if e.kvH[i] == nil {
				e.kvH[i] = newHist(BucketsKVTransfer[i])
			}
			e.kvH[i].observe(v)
		}
	}
}

// Retract records one scheduler step on dp rank dp that retracted n running requests (KV pool exhausted) holding
// inTok prompt and outTok generated tokens: the retraction counters grow and the num_retracted_reqs gauge reports n
// until the next call.
func (e *Engine) Retract(dp, n, inTok, outTok int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.rank(dp)
	rs.lastRetracted = n
	rs.retractedReqs += float64(n)
	rs.retractedIn += float64(inTok)
	rs.retractedOut += float64(outTok)
}

// FailTransfer counts a PD bootstrap (bootstrap true) or KV transfer failure on dp rank dp.
func (e *Engine) FailTransfer(dp int, bootstrap bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if bootstrap {
		e.rank(dp).bootFailed++
	} else {
		e.rank(dp).transferFailed++
	}
}

// SetPaused marks the engine paused by an async weight sync (num_paused_reqs reports the running requests).
func (e *Engine) SetPaused(p bool) {
	e.mu.Lock()
	e.paused = p
	e.mu.Unlock()
}

func generatedAt(r *Request, at time.Time) int {
	if !at.After(r.FirstToken) {
		return 0
	}
	d := r.End.Sub(r.FirstToken).Seconds()
	if d <= 0 || !at.Before(r.End) {
		return r.CompletionTokens
	}
	return 1 + int(float64(r.CompletionTokens-1)*at.Sub(r.FirstToken).Seconds()/d)
}

func (e *Engine) schedLabels(dp, pp int) []Label {
	tpPerDP := max(1, e.cfg.TPSize/e.cfg.DPSize)
	return []Label{
		{"dp_rank", strconv.Itoa(dp)},
		{"engine_type", e.cfg.EngineType},
		{"model_name", e.cfg.ModelName},
		{"moe_ep_rank", "0"},
		{"pp_rank", strconv.Itoa(pp)},
		{"tp_rank", strconv.Itoa(dp * tpPerDP)},
	}
}

// Families returns the engine's metric families as a scrape at time at would see them.
func (e *Engine) Families(at time.Time) []Family {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := func(name, help string) Family { return Family{Name: name, Help: help, Kind: Gauge} }
	running := g("sglang:num_running_reqs", "The number of running requests.")
	usedTok := g("sglang:num_used_tokens", "The number of used tokens.")
	usage := g("sglang:token_usage", "The token usage.")
	thr := g("sglang:gen_throughput", "The generation throughput (token/s).")
	queue := g("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
	cache := g("sglang:cache_hit_rate", "The prefix cache hit rate.")
	maxTok := g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
	paused := g("sglang:num_paused_reqs", "The number of paused requests by async weight sync.")
	retracted := g("sglang:num_retracted_reqs", "The number of retracted requests.")
	util := g("sglang:utilization", "The utilization.")
	cudaGraph := g("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.")
	sumSeq := g("sglang:decode_sum_seq_lens", "The sum of all sequence lengths in decode.")
	specRate := g("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).")
	specLen := g("sglang:spec_accept_length", "The average acceptance length of speculative decoding.")
	sc := func(name, help string) Family { return Family{Name: name, Help: help, Kind: Counter} }
	retrReqs := sc("sglang:num_retracted_requests_total", "Total number of retracted requests.")
	retrIn := sc("sglang:num_retracted_input_tokens_total", "Total number of retracted input tokens.")
	retrOut := sc("sglang:num_retracted_output_tokens_total", "Total number of retracted output tokens.")
	queueTime := Family{Name: "sglang:queue_time_seconds", Help: "Histogram of queueing time in seconds.", Kind: Histogram, Bounds: BucketsQueue}
	perStage := Family{Name: "sglang:per_stage_req_latency_seconds", Help: "The latency of each stage of requests.", Kind: Histogram, Bounds: BucketsStage}
	pdNames := [][2]string{
		{"sglang:num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue."},
		{"sglang:num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue."},
		{"sglang:num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."},
		{"sglang:num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."},
		{"sglang:kv_transfer_speed_gb_s", "The transfer speed of the KV cache in GB/s."},
		{"sglang:kv_transfer_latency_ms", "The transfer latency of the KV cache in ms."},
		{"sglang:kv_transfer_bootstrap_ms", "The bootstrap time of the KV transfer in ms."},
		{"sglang:kv_transfer_alloc_ms", "The allocation waiting time of the KV transfer in ms."},
		{"sglang:kv_transfer_total_mb", "The total number of tokens transferred in the KV cache."},
	}
	pd := make([]Family, len(pdNames))
	for i, n := range pdNames {
		pd[i] = g(n[0], n[1])
		if i >= 4 { // the KV-transfer figures are histograms (srt/observability/metrics_collector.py)
			pd[i] = Family{Name: n[0], Help: n[1], Kind: Histogram, Bounds: BucketsKVTransfer[i-4]}
		}
	}
	bootFailed := sc("sglang:num_bootstrap_failed_reqs_total", "The number of bootstrap failed requests.")
	transferFailed := sc("sglang:num_transfer_failed_reqs_total", "The number of transfer failed requests.")
	for dp, rs := range e.ranks {
		var tokens, seq int
		var rate float64
		var prefilling, decoding int
		for _, r := range rs.running {
			gen := generatedAt(r, at)
			tokens += r.PromptTokens + gen
			seq += r.PromptTokens + gen
			if at.Before(r.FirstToken) {
				prefilling++
			} else {
				decoding++
				if d := r.End.Sub(r.FirstToken).Seconds(); d > 0 && at.Before(r.End) && !e.paused {
					rate += float64(r.CompletionTokens) / d
				}
			}
		}
		tokens = min(tokens+rs.retained, e.cfg.MaxTotalNumTokens)
		if e.paused && decoding > 0 {
			rate = rs.lastThroughput
		} else {
			rs.lastThroughput = rate
		}
		n := len(rs.running)
		nPaused := 0
		if e.paused {
			nPaused = n
		}
		var accRate, accLen float64
		if e.cfg.Speculative && decoding > 0 {
			accRate = round(0.62+0.1*math.Sin(float64(e.reqTotal)*0.21), 3)
			accLen = round(1+3*accRate, 3)
		}
		stages := make([]string, 0, len(rs.stageH))
		for st := range rs.stageH {
			stages = append(stages, st)
		}
		sort.Strings(stages)
		// Every pipeline stage's scheduler reports its own series (sglang: attention-TP rank 0 of each dp rank
		// and pp rank); the fake gives them the same values.
		for pp := 0; pp < e.cfg.PPSize; pp++ {
			lb := e.schedLabels(dp, pp)
			add := func(f *Family, v float64) { f.Samples = append(f.Samples, Sample{Labels: lb, Value: v}) }
			add(&running, float64(n))
			add(&usedTok, float64(tokens))
			add(&usage, round(float64(tokens)/float64(e.cfg.MaxTotalNumTokens), 2))
			add(&thr, round(rate, 2))
			add(&queue, float64(rs.queued))
			add(&cache, round(rs.cacheEW, 4))
			add(&maxTok, float64(e.cfg.MaxTotalNumTokens))
			add(&paused, float64(nPaused))
			add(&retracted, float64(rs.lastRetracted))
			add(&util, round(min(1, float64(n)/64), 3))
			add(&cudaGraph, b2f(decoding > 0))
			add(&sumSeq, float64(seq))
			add(&specRate, accRate)
			add(&specLen, accLen)
			add(&retrReqs, rs.retractedReqs)
			add(&retrIn, rs.retractedIn)
			add(&retrOut, rs.retractedOut)
			queueTime.Samples = append(queueTime.Samples, histSample(lb, rs.queueH))
			for _, st := range stages {
				sl := append(append(make([]Label, 0, len(lb)+1), lb...), Label{"stage", st})
				perStage.Samples = append(perStage.Samples, histSample(sl, rs.stageH[st]))
			}
			switch e.cfg.EngineType {
			case EnginePrefill:
				add(&pd[0], float64(rs.queued))
				add(&pd[1], float64(decoding))
			case EngineDecode:
				add(&pd[2], float64(rs.queued))
				add(&pd[3], float64(prefilling))
			}
			if e.cfg.EngineType != EngineUnified {
				for i, h := range e.kvH {
					if h == nil {
						h = newHist(BucketsKVTransfer[i])
					}
					pd[4+i].Samples = append(pd[4+i].Samples, histSample(lb, h))
				}
				add(&bootFailed, rs.bootFailed)
				add(&transferFailed, rs.transferFailed)
			}
		}
	}
	fams := []Family{
		running, usedTok, usage, thr, queue, cache, maxTok, paused, retracted, util, cudaGraph,
		sumSeq, specRate, specLen, retrReqs, retrIn, retrOut,
	}
	if e.cfg.EngineType != EngineUnified {
		switch e.cfg.EngineType {
		case EnginePrefill:
			fams = append(fams, pd[0], pd[1])
		case EngineDecode:
			fams = append(fams, pd[2], pd[3])
		}
		fams = append(fams, pd[4], pd[5], pd[6], pd[7], pd[8], bootFailed, transferFailed)
	}
	fams = append(fams, queueTime, perStage)

	// The tokenizer's families (TokenizerMetricsCollector): engine_type and model_name on each; the request
	// counters and latency histograms keep streamed and non-streamed requests apart (is_streaming: the fake's
	// requests are non-streamed, as miles' rollout sends them), cached tokens come by cache_source (the fake
	// reports only the "total" that sglang writes beside its device/host/storage split).
	tl := []Label{{"engine_type", e.cfg.EngineType}, {"model_name", e.cfg.ModelName}}
	stream := append(slices.Clone(tl), Label{"is_streaming", "false"})
	cached := append([]Label{{"cache_source", "total"}}, tl...)
	startup := g("sglang:startup_time_seconds", "Engine startup duration by phase in seconds.")
	for _, ph := range [...]struct { // emit_startup_time: one series per startup phase
		phase string
		v     float64
	}{{"load_weight", e.cfg.LoadWeightsSeconds}, {"kv_cache_allocation", 2.1}, {"scheduler_e2e", e.cfg.StartupSeconds}, {"tokenizer_e2e", 3.4}} {
		startup.Samples = append(startup.Samples, Sample{Labels: append(slices.Clone(tl), Label{"phase", ph.phase}), Value: ph.v})
	}
	fams = append(fams, startup)
	c := func(name, help string, lb []Label, v float64) Family {
		return Family{Name: name, Help: help, Kind: Counter, Samples: []Sample{{Labels: lb, Value: v}}}
	}
	h := func(name, help string, lb []Label, hh *hist) Family {
		return Family{Name: name, Help: help, Kind: Histogram, Bounds: hh.bounds, Samples: []Sample{histSample(lb, hh)}}
	}
	fams = append(fams,
		c("sglang:prompt_tokens_total", "Number of prefill tokens processed.", stream, e.promptTotal),
		c("sglang:generation_tokens_total", "Number of generation tokens processed.", stream, e.genTotal),
		c("sglang:cached_tokens_total", "Number of cached prompt tokens.", cached, e.cachedTotal),
		c("sglang:num_requests_total", "Number of requests processed.", stream, e.reqTotal),
		c("sglang:num_aborted_requests_total", "Number of requests aborted.", tl, e.abortTotal),
		h("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", stream, e.ttft),
		h("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tl, e.itl),
		h("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", stream, e.e2e),
	)
	return fams
}

func histSample(lb []Label, h *hist) Sample {
	return Sample{Labels: lb, Buckets: append([]float64(nil), h.buckets...), Count: h.count, Sum: h.sum}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
