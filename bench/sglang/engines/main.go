// Command engines serves N fake sglang engines (internal/fakesglang) on loopback for bench/sglang/run.sh: each
// engine gets a steady trickle of requests so gauges move and counters and histograms grow, and the file_sd targets
// file (docs/semconv.md §9) lists them all. With -router it also serves a fake router /engine_metrics over all
// engines (underscore names, like the pinned sglang-router) and prints its address.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

func main() {
	n := flag.Int("n", 128, "engines")
	dp := flag.Int("dp", 4, "dp ranks per engine (one scheduler series set each)")
	targets := flag.String("targets", "", "file_sd targets file to write (atomically)")
	router := flag.Bool("router", false, "also serve a fake router /engine_metrics over all engines")
	rate := flag.Float64("rps", 2, "requests per second per engine")
	flag.Parse()

	var engines []*fakesglang.Engine
	var servers []*fakesglang.Server
	var groups []map[string]any
	var workers []fakesglang.Worker
	for i := 0; i < *n; i++ {
		et := fakesglang.EngineUnified
		switch i % 8 { // a PD slice, so the PD gauges are part of the load
		case 6:
			et = fakesglang.EnginePrefill
		case 7:
			et = fakesglang.EngineDecode
		}
		e := fakesglang.NewEngine(fakesglang.Config{DPSize: *dp, EngineType: et, TPSize: *dp})
		s, err := fakesglang.Serve(e, "127.0.0.1:0", nil)
		if err != nil {
			log.Fatal(err)
		}
		engines = append(engines, e)
		servers = append(servers, s)
		groups = append(groups, map[string]any{
			"targets": []string{s.Addr()},
			"labels":  map[string]string{"engine_rank": strconv.Itoa(i), "worker_type": et},
		})
		workers = append(workers, fakesglang.Worker{URL: s.URL(), Engine: e})
	}
	if *targets != "" {
		b, _ := json.Marshal(groups)
		tmp := filepath.Join(filepath.Dir(*targets), ".targets.tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *targets); err != nil {
			log.Fatal(err)
		}
	}
	var routerBytes atomic.Int64
	if *router {
		r := &fakesglang.Router{Underscore: true}
		r.SetWorkers(workers)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		h := r.Handler(nil)
		go func() {
			srv := &http.Server{
				Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					cw := &countWriter{ResponseWriter: w}
					h.ServeHTTP(cw, req)
					routerBytes.Store(cw.n)
				}),
				ReadHeaderTimeout: 10 * time.Second,
			}
			_ = srv.Serve(ln)
		}()
		fmt.Printf("router %s\n", ln.Addr())
	}
	fmt.Printf("ready %d engines\n", len(servers))

	// Traffic: every 100 ms each engine starts the requests due and finishes those that are done.
	rng := rand.New(rand.NewPCG(1, 1))
	type live struct {
		r  fakesglang.Request
		ei int
	}
	var running []live
	var id uint64
	tick := time.NewTicker(100 * time.Millisecond)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	perTick := *rate / 10
	for {
		select {
		case <-stop:
			if *router {
				fmt.Printf("router exposition %d bytes\n", routerBytes.Load())
			}
			return
		case now := <-tick.C:
			keep := running[:0]
			for _, l := range running {
				if now.After(l.r.End) {
					engines[l.ei].Finish(l.r.ID, l.r.DPRank, now, rng.IntN(50) == 0)
				} else {
					keep = append(keep, l)
				}
			}
			running = keep
			for ei, e := range engines {
				if rng.Float64() >= perTick {
					continue
				}
				id++
				ttft := time.Duration(100+rng.IntN(900)) * time.Millisecond
				r := fakesglang.Request{
					ID: id, DPRank: rng.IntN(*dp), PromptTokens: 200 + rng.IntN(2000),
					CachedTokens: rng.IntN(200), CompletionTokens: 50 + rng.IntN(500), Submit: now,
					Start: now.Add(20 * time.Millisecond), FirstToken: now.Add(ttft),
					End: now.Add(ttft + time.Duration(1+rng.IntN(8))*time.Second),
				}
				e.Arrive(r.DPRank)
				e.Begin(r)
				running = append(running, live{r, ei})
			}
		}
	}
}

type countWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.ResponseWriter.Write(p)
}
