package server

// Live pushes of the explorer (issue 8) over the page's WebSocket (live.go): {"type":"metrics"} when step
// metrics, keys or consumed steps grew, {"type":"advisory"} when the advisory changed. They go to every page,
// whatever it subscribed to, and use the hub's non-blocking enqueue (a page that does not read is resynced,
// then dropped, as for deltas).

import (
	"encoding/json"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Push cadence: metrics at most every metricsEvery, the advisory (heavier: whole-run data) at most every
// advisoryEvery.
var (
	metricsEvery  = time.Second
	advisoryEvery = 3 * time.Second
)

// maxPushPoints: above this many changed points since the last push, pages are told to re-fetch instead.
const maxPushPoints = 20000

type liveState struct {
	mu       sync.Mutex
	init     bool
	cursor   uint64
	keys     map[string]bool
	lastStep int
	advJSON  []byte // last advisory message sent
	advWake  chan struct{}

	metricsEvery, advisoryEvery time.Duration // the package cadences when the server was built
}

func (h *hub) clientList() []*client {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := make([]*client, 0, len(h.clients))
	for c := range h.clients {
		cs = append(cs, c)
	}
	return cs
}

func (h *hub) broadcast(msg []byte) {
	for _, c := range h.clientList() {
		h.enqueue(c, msg)
	}
}

// explorerHello is called by serveWS once the page's writer runs: a new page gets the current advisory. The
// first page starts the metrics cursor: pushes carry what changed after a page connected (pages fetch their data
// over HTTP once their socket is open).
func (s *Server) explorerHello(c *client) {
	e := s.ex()
	e.live.mu.Lock()
	if !e.live.init {
		// Only what is cheap: the metrics stream (the compute view must not pay for engine hours or the
		// trajectory index it never shows).
		e.live.init = true
		e.live.cursor = s.st.MetricsCursor()
		e.live.keys = map[string]bool{}
		for _, k := range s.st.StepMetricKeys() {
			e.live.keys[k.Key] = true
		}
		e.live.lastStep = math.MinInt
		if steps, ok := s.st.LifecycleStepsIfIndexed(); ok {
			for _, st := range steps {
				e.live.lastStep = max(e.live.lastStep, st.Step)
			}
		}
	}
	adv := e.live.advJSON
	wake := e.live.advWake
	e.live.mu.Unlock()
	if adv != nil {
		s.hub.enqueue(c, adv)
	}
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

func (e *explorer) runLive() {
	h := e.s.hub
	ch := e.s.st.Subscribe()
	defer e.s.st.Unsubscribe(ch)
	defer explorers.Delete(e.s)
	wake := make(chan struct{}, 1)
	e.live.mu.Lock()
	e.live.advWake = wake
	e.live.mu.Unlock()
	mt := time.NewTicker(e.live.metricsEvery)
	defer mt.Stop()
	at := time.NewTicker(e.live.advisoryEvery)
	defer at.Stop()
	dirtyM, dirtyA := true, true
	for {
		select {
		case <-h.stop:
			return
		case <-ch:
			dirtyM, dirtyA = true, true
		case <-wake:
			dirtyA = true
			e.live.mu.Lock()
			e.live.advJSON = nil // the new page has nothing: send even if unchanged
			e.live.mu.Unlock()
			e.pushAdvisory()
			dirtyA = false
		case <-mt.C:
			if dirtyM && len(h.clientList()) > 0 {
				dirtyM = false
				e.pushMetrics()
			}
		case <-at.C:
			if dirtyA && len(h.clientList()) > 0 {
				dirtyA = false
				e.pushAdvisory()
			}
		}
	}
}

// pushMetrics sends what grew since the last push. It runs only while pages are connected; a page may receive
// points it already fetched (points replace by (key, step): receiving one twice is harmless); when the log has
// moved on by more than maxPushPoints the message says refetch instead.
func (e *explorer) pushMetrics() {
	st := e.s.st
	ls := &e.live
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.init {
		return // no page ever connected
	}
	changes, cursor, ok := st.MetricChangesSince(ls.cursor, maxPushPoints)
	ls.cursor = cursor
	var newKeys []store.MetricKey
	for _, k := range st.StepMetricKeys() {
		if !ls.keys[k.Key] {
			ls.keys[k.Key] = true
			newKeys = append(newKeys, k)
		}
	}
	var steps []store.StepSummary
	all, _ := st.LifecycleStepsIfIndexed() // consumed steps once a lifecycle view or the advisory indexed them
	for _, s := range all {
		if s.Step > ls.lastStep {
			steps = append(steps, s)
		}
	}
	if len(steps) > 0 {
		ls.lastStep = steps[len(steps)-1].Step
	}
	if len(changes) == 0 && len(newKeys) == 0 && len(steps) == 0 && ok {
		return
	}
	type xy struct {
		X store.Floats `json:"x"`
		Y store.Floats `json:"y"`
	}
	points := map[string]*xy{}
	add := func(k string, x, y float64) {
		p := points[k]
		if p == nil {
			p = &xy{}
			points[k] = p
		}
		p.X, p.Y = append(p.X, x), append(p.Y, y)
	}
	for _, c := range changes {
		add(c.Key, c.X, c.Y)
	}
	for _, s := range steps {
		x := float64(s.Step)
		if s.StalenessMean != nil {
			add("lifecycle/staleness_mean", x, *s.StalenessMean)
		}
		if s.StalenessMax != nil {
			add("lifecycle/staleness_max", x, *s.StalenessMax)
		}
		if s.MixedFrac != nil {
			add("lifecycle/mixed_version_frac", x, *s.MixedFrac)
		}
		if s.Samples > 0 && s.Status != "" {
			add("lifecycle/known_frac", x, float64(s.Known)/float64(s.Samples))
		}
	}
	for _, p := range points { // a key's points in step order (the log is in arrival order)
		idx := make([]int, len(p.X))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return p.X[idx[a]] < p.X[idx[b]] })
		x, y := make(store.Floats, len(idx)), make(store.Floats, len(idx))
		for i, j := range idx {
			x[i], y[i] = p.X[j], p.Y[j]
		}
		p.X, p.Y = x, y
	}
	if newKeys == nil {
		newKeys = []store.MetricKey{}
	}
	if steps == nil {
		steps = []store.StepSummary{}
	}
	msg, _ := json.Marshal(map[string]any{"type": "metrics", "data": map[string]any{
		"new_keys": newKeys, "points": points, "steps": steps, "refetch": !ok}})
	e.s.hub.broadcast(msg)
}

// pushAdvisory recomputes the advisory (cached until the data changes) and sends it when it differs from the
// last one sent. The live advisory uses the run's settings without query overrides and the whole run.
func (e *explorer) pushAdvisory() {
	cfg, err := e.configFor(nil)
	if err != nil {
		return
	}
	res := e.compute(cfg, nil)
	msg, _ := json.Marshal(map[string]any{"type": "advisory", "data": res})
	e.live.mu.Lock()
	same := e.live.advJSON != nil && string(e.live.advJSON) == string(msg)
	if !same {
		e.live.advJSON = msg
	}
	e.live.mu.Unlock()
	if !same {
		e.s.hub.broadcast(msg)
	}
}
