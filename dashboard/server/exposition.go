package server

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The advisory as Prometheus metrics (GET /metrics, text exposition format 0.0.4), so existing alerting pages
// on a stall: one gauge per rule and run, 1 while the rule fires (docs/operations.md "Alerting").

// runAdvice is one run's part of the exposition.
type runAdvice struct {
	run      string
	live     bool
	edge     float64
	step     *int64
	res      *advisory.Result
	explored bool // the advisory was evaluated (the run is open)
	// goodput is the run's goodput ledger per fleet (docs/semconv.md §12), when explored.
	goodput []store.GoodputFleet
	// settled counts the steps whose explanations the run's server computed ahead (nil: it does not).
	settled *int64
}

// writeExposition writes the gauges of every run given, and the memory budget's figures (nil: none).
func writeExposition(w http.ResponseWriter, runs []runAdvice, mem *store.Budget) {
	sort.Slice(runs, func(i, j int) bool { return runs[i].run < runs[j].run })
	var b bytes.Buffer
	typed := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family := func(name, help string) { typed(name, "gauge", help) }
	family("miles_advisory_firing", "1 while the advisory rule fires on the run, else 0 (severity: the rule's level; tier: alarm or tip).")
	for _, r := range runs {
		if !r.explored {
			continue
		}
		firing := map[string]string{}
		for _, l := range [][]advisory.Advisory{r.res.Advisories, r.res.Suppressed} {
			for _, a := range l {
				if cur, ok := firing[a.ID]; !ok || levelOrder(a.Level) < levelOrder(cur) {
					firing[a.ID] = a.Level
				}
			}
		}
		for _, rule := range advisory.Rules {
			level, on := firing[rule.ID]
			if !on {
				level = rule.Level
			}
			fmt.Fprintf(&b, "miles_advisory_firing{run=%s,id=%s,rule=%s,severity=%s,tier=%s} %d\n",
				label(r.run), label(rule.ID), label(rule.Rule), label(level), label(rule.Tier), b2i(on))
		}
	}
	family("miles_advisory_skipped", "1 when the rule could not be evaluated on the run (a setting or stream it needs is missing).")
	for _, r := range runs {
		if !r.explored {
			continue
		}
		skipped := map[string]bool{}
		for _, s := range r.res.Skipped {
			skipped[s.ID] = true
		}
		for _, rule := range advisory.Rules {
			fmt.Fprintf(&b, "miles_advisory_skipped{run=%s,id=%s,rule=%s} %d\n", label(r.run), label(rule.ID), label(rule.Rule), b2i(skipped[rule.ID]))
		}
	}
	family("miles_advisory_evaluated", "1 when the run's advisory is evaluated here (live or open runs), 0 for runs only listed.")
	for _, r := range runs {
		fmt.Fprintf(&b, "miles_advisory_evaluated{run=%s} %d\n", label(r.run), b2i(r.explored))
	}
	family("miles_goodput_ratio", "Productive GPU-seconds over all GPU-seconds of the steps of the run's last 4 hours, per fleet (docs/semconv.md §12).")
	for _, r := range runs {
		for _, f := range r.goodput {
			fmt.Fprintf(&b, "miles_goodput_ratio{run=%s,fleet=%s} %s\n", label(r.run), label(f.Fleet), strconv.FormatFloat(f.Ratio, 'f', -1, 64))
		}
	}
	family("miles_goodput_gpu_seconds", "GPU-seconds of the steps of the run's last 4 hours per fleet and ledger class: productive, overhead, idle, wasted (docs/semconv.md §12).")
	for _, r := range runs {
		for _, f := range r.goodput {
			for c, class := range store.GoodputClasses {
				fmt.Fprintf(&b, "miles_goodput_gpu_seconds{run=%s,fleet=%s,class=%s} %s\n", label(r.run), label(f.Fleet), label(class), strconv.FormatFloat(f.Seconds[c], 'f', -1, 64))
			}
		}
	}
	typed("miles_explain_steps_settled_total", "counter", "Steps whose explanations this dashboard computed ahead while no query was answered (--settle-every; docs/operations.md), per open run.")
	for _, r := range runs {
		if r.settled != nil {
			fmt.Fprintf(&b, "miles_explain_steps_settled_total{run=%s} %d\n", label(r.run), *r.settled)
		}
	}
	family("miles_run_live", "1 while a file of the run changed within the live window.")
	for _, r := range runs {
		fmt.Fprintf(&b, "miles_run_live{run=%s} %d\n", label(r.run), b2i(r.live))
	}
	family("miles_run_data_edge_seconds", "The newest record time of the run (Unix seconds; 0 when unknown).")
	for _, r := range runs {
		fmt.Fprintf(&b, "miles_run_data_edge_seconds{run=%s} %s\n", label(r.run), strconv.FormatFloat(r.edge, 'f', -1, 64))
	}
	family("miles_run_latest_step", "The newest logged step of the run.")
	for _, r := range runs {
		if r.step != nil {
			fmt.Fprintf(&b, "miles_run_latest_step{run=%s} %d\n", label(r.run), *r.step)
		}
	}
	// The server's own state, so a long follow (the soak, docs/reliability.md) or an operator sees growth.
	proc := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(proc)
	family("miles_dashboard_goroutines", "Goroutines of this dashboard process.")
	fmt.Fprintf(&b, "miles_dashboard_goroutines %d\n", sampleUint(proc[0]))
	family("miles_dashboard_heap_objects_bytes", "Bytes of live and not yet swept heap objects of this dashboard process.")
	fmt.Fprintf(&b, "miles_dashboard_heap_objects_bytes %d\n", sampleUint(proc[1]))
	family("miles_dashboard_go_memory_bytes", "All memory the Go runtime of this dashboard process has mapped (heap, stacks, runtime).")
	fmt.Fprintf(&b, "miles_dashboard_go_memory_bytes %d\n", sampleUint(proc[2]))
	if mem != nil { // docs/operations.md "Memory"
		family("miles_dashboard_memory_budget_bytes", "The byte budget over the parsed hour blocks of every open run (--memory-budget; 0: unlimited).")
		fmt.Fprintf(&b, "miles_dashboard_memory_budget_bytes %d\n", max(0, mem.Limit()))
		family("miles_dashboard_memory_held_bytes", "Bytes of parsed hour blocks held (gpu_util, gpu_rollup, trajectories, engine_traces), by their size estimates.")
		fmt.Fprintf(&b, "miles_dashboard_memory_held_bytes %d\n", mem.Held())
		typed("miles_dashboard_memory_evictions_total", "counter", "Hour blocks dropped to stay within the memory budget.")
		fmt.Fprintf(&b, "miles_dashboard_memory_evictions_total %d\n", mem.Evictions())
		typed("miles_dashboard_memory_reloads_total", "counter", "Dropped hour blocks a query read again from the files or the column cache.")
		fmt.Fprintf(&b, "miles_dashboard_memory_reloads_total %d\n", mem.Reloads())
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}

func levelOrder(l string) int {
	switch l {
	case advisory.Critical:
		return 0
	case advisory.Warning:
		return 1
	}
	return 2
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// label quotes a label value as the exposition format escapes it: backslash, double quote and newline.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// exposition of a one-run server: its run is named by meta.json's run_name, else its directory's name.
func (s *Server) exposition(w http.ResponseWriter, _ *http.Request) {
	cfg, _ := s.advisoryConfig(nil)
	m := s.run.Meta()
	name := m.RunName
	if name == "" {
		name = filepath.Base(s.run.Dir())
	}
	writeExposition(w, []runAdvice{{
		run: name, live: m.Live, edge: m.DataEdge, res: s.advisoryResult(cfg, nil), explored: true, goodput: s.goodputTotal(),
		settled: s.settledSteps(),
	}}, s.budget)
}
