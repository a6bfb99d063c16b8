package fakesglang

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// GenerateConfig shapes the fake's answers to POST /generate (sglang's native generate API): a request waits for
// one of MaxRunning slots (prefill_waiting: real queueing when callers send more), prefills at PrefillPerToken
// and decodes at InterTokenLatency per output token, then answers with sglang's meta_info.
type GenerateConfig struct {
	// MaxRunning is the number of requests decoded at once (default 8).
	MaxRunning int
	// PrefillPerToken is the prefill time per prompt token (default 20 µs).
	PrefillPerToken time.Duration
	// InterTokenLatency is the decode time per output token (default 1 ms).
	InterTokenLatency time.Duration
	// MaxNewTokens caps sampling_params.max_new_tokens (default 64), so a test run stays short.
	MaxNewTokens int
	// WeightVersion is meta_info.weight_version (default "1").
	WeightVersion string
	// ToolCall, when set, is the answer's text for a request whose prompt has at most ToolCallMaxPrompt tokens
	// (a conversation's first turn): a model calling a tool, in the format of the caller's tool-call parser
	// (e.g. qwen25's `<tool_call>{…}</tool_call>`). Longer prompts (the turn after the tool's answer) get plain text.
	ToolCall          string
	ToolCallMaxPrompt int
}

func (c *GenerateConfig) defaults() {
	if c.MaxRunning <= 0 {
		c.MaxRunning = 8
	}
	if c.PrefillPerToken <= 0 {
		c.PrefillPerToken = 20 * time.Microsecond
	}
	if c.InterTokenLatency <= 0 {
		c.InterTokenLatency = time.Millisecond
	}
	if c.MaxNewTokens <= 0 {
		c.MaxNewTokens = 64
	}
	if c.WeightVersion == "" {
		c.WeightVersion = "1"
	}
}

// generator answers /generate and traces each request when a tracer and exporter are set.
type generator struct {
	cfg     GenerateConfig
	version atomic.Pointer[string] // meta_info.weight_version; POST /update_weight_version replaces it
	// pausedMu guards paused: closed by POST /continue_generation, nil while generation runs.
	pausedMu sync.Mutex
	paused   chan struct{}
	slots    chan struct{}
	tracer   *Tracer
	exp      *SpanExporter

	mu   sync.Mutex
	seen int
}

// EnableGenerate makes the server answer POST /generate with cfg. With tracer and exp (both non-nil, as sglang
// with --enable-trace --otlp-traces-endpoint) every request's spans are exported, under the caller's
// traceparent when the request carries one.
func (s *Server) EnableGenerate(cfg GenerateConfig, tracer *Tracer, exp *SpanExporter) {
	cfg.defaults()
	g := &generator{cfg: cfg, slots: make(chan struct{}, cfg.MaxRunning), tracer: tracer, exp: exp}
	v := cfg.WeightVersion
	g.version.Store(&v)
	s.gen.Store(g)
}

// Generated is the number of /generate requests answered.
func (s *Server) Generated() int {
	g := s.gen.Load()
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen
}

type generateReq struct {
	Text           string `json:"text"`
	InputIDs       []int  `json:"input_ids"`
	RID            string `json:"rid"`
	ReturnLogprob  bool   `json:"return_logprob"`
	SamplingParams struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	} `json:"sampling_params"`
}

func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request) {
	g := s.gen.Load()
	if g == nil {
		http.Error(w, "generate is not enabled on this fake engine", http.StatusNotFound)
		return
	}
	recv := time.Now()
	var req generateReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<24)).Decode(&req); err != nil {
		http.Error(w, "bad generate request: "+err.Error(), http.StatusBadRequest)
		return
	}
	prompt := len(req.InputIDs)
	if prompt == 0 {
		prompt = len(strings.Fields(req.Text)) + 1
	}
	out := 16
	if p := req.SamplingParams.MaxNewTokens; p != nil && *p >= 0 {
		out = *p
	}
	out = min(out, g.cfg.MaxNewTokens)
	rid := req.RID
	if rid == "" && g.tracer != nil {
		rid = g.tracer.NewRID()
	} else if rid == "" {
		rid = strconv.FormatInt(recv.UnixNano(), 16)
	}
	submit := time.Now()
	if held := g.held(); held != nil { // paused for a weight sync: admitted when generation continues
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	select {
	case g.slots <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	start := time.Now()
	time.Sleep(time.Duration(prompt) * g.cfg.PrefillPerToken)
	first := time.Now()
	time.Sleep(time.Duration(out) * g.cfg.InterTokenLatency)
	end := time.Now()
	<-g.slots
	if g.tracer != nil && g.exp != nil {
		tr := TracedRequest{
			RID: rid, Received: recv, Submit: submit, Start: start, FirstToken: first, End: end,
			PromptTokens: prompt, CompletionTokens: out,
		}
		// sglang reads the W3C headers through its TraceContextTextMapPropagator (extract_trace_headers).
		if tid, sid, ok := ParseTraceparent(r.Header.Get("traceparent")); ok {
			tr.Trace, tr.Parent = tid, sid
		}
		g.exp.Add(func(ss ptrace.SpanSlice) int { _, n := g.tracer.Append(ss, tr); return n })
	}
	g.mu.Lock()
	g.seen++
	g.mu.Unlock()
	// sglang stops at max_new_tokens with "length"; an answer the fake cut shorter reads as an EOS ("stop").
	finish := map[string]any{"type": "stop", "matched": 0}
	if p := req.SamplingParams.MaxNewTokens; p != nil && out == *p {
		finish = map[string]any{"type": "length", "length": out}
	}
	meta := map[string]any{
		"id": rid, "prompt_tokens": prompt, "completion_tokens": out, "cached_tokens": 0,
		"finish_reason": finish, "weight_version": *g.version.Load(),
		"e2e_latency": time.Since(recv).Seconds(),
	}
	if req.ReturnLogprob { // sglang's [logprob, token id, token text] per output token
		lp := make([][]any, out)
		for i := range lp {
			lp[i] = []any{-0.5, 100 + i%50, nil}
		}
		meta["output_token_logprobs"] = lp
	}
	text := strings.Repeat(" tok", out)
	if g.cfg.ToolCall != "" && prompt <= g.cfg.ToolCallMaxPrompt {
		text = g.cfg.ToolCall
		meta["finish_reason"] = map[string]any{"type": "stop", "matched": 0}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"text": text, "meta_info": meta})
}

// serveControl answers the engine endpoints a router and miles call besides /generate, in sglang's shapes:
// GET /model_info and /server_info (the router reads them when a worker is added), POST /abort_request (miles
// aborts every engine at the end of a rollout), and the weight version miles' weight update sets
// (POST /update_weight_version {"new_version": …}, GET /get_weight_version).
func (s *Server) serveControl(mux *http.ServeMux) {
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	version := func() string {
		if g := s.gen.Load(); g != nil {
			return *g.version.Load()
		}
		return ""
	}
	mux.HandleFunc("GET /model_info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"model_path": "fake-sglang", "tokenizer_path": "fake-sglang", "is_generation": true})
	})
	mux.HandleFunc("GET /server_info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"model_path": "fake-sglang", "weight_version": version(), "version": "0.5.23"})
	})
	mux.HandleFunc("GET /get_weight_version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"weight_version": version()})
	})
	mux.HandleFunc("POST /abort_request", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// miles' weight sync around an update: pause (new requests wait), flush the cache, continue.
	mux.HandleFunc("POST /pause_generation", func(w http.ResponseWriter, _ *http.Request) {
		if g := s.gen.Load(); g != nil {
			g.pause()
		}
		writeJSON(w, map[string]any{"success": true})
	})
	mux.HandleFunc("POST /continue_generation", func(w http.ResponseWriter, _ *http.Request) {
		if g := s.gen.Load(); g != nil {
			g.resume()
		}
		writeJSON(w, map[string]any{"success": true})
	})
	mux.HandleFunc("/flush_cache", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("Cache flushed.\n"))
	})
	mux.HandleFunc("POST /update_weight_version", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			NewVersion string `json:"new_version"`
		}
		g := s.gen.Load()
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || g == nil || req.NewVersion == "" {
			http.Error(w, "bad update_weight_version request", http.StatusBadRequest)
			return
		}
		g.version.Store(&req.NewVersion)
		writeJSON(w, map[string]any{"success": true, "message": "weight version updated to " + req.NewVersion})
	})
}

// held is what a new request waits on while generation is paused (nil: not paused).
func (g *generator) held() chan struct{} {
	g.pausedMu.Lock()
	defer g.pausedMu.Unlock()
	return g.paused
}

func (g *generator) pause() {
	g.pausedMu.Lock()
	defer g.pausedMu.Unlock()
	if g.paused == nil {
		g.paused = make(chan struct{})
	}
}

func (g *generator) resume() {
	g.pausedMu.Lock()
	defer g.pausedMu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}
