package server

import (
	"bytes"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The live streams (docs/dashboard-api.md "WebSocket"): the run's meta and the phases and GPU series of each page's
// window ("meta", "delta"), the step metrics ("metrics"), the advisory ("advisory") and a periodic "heartbeat"
// with the server's clock and the data edge, so every view shows one data freshness that keeps aging while the
// collector is stalled (nothing else is sent then).

func (s *Server) streams(opts Options) []stream {
	metricsEvery, advisoryEvery := opts.MetricsPushEvery, opts.AdvisoryPushEvery
	if metricsEvery <= 0 {
		metricsEvery = time.Second
	}
	if advisoryEvery <= 0 {
		advisoryEvery = 3 * time.Second
	}
	heartbeatEvery := opts.HeartbeatEvery
	if heartbeatEvery <= 0 {
		heartbeatEvery = 5 * time.Second
	}
	return []stream{
		&runStream{run: s.run, compute: s.compute, sent: s.run.Edge(), metaV: s.run.MetaVersion()},
		&metricsStream{metrics: s.metrics, traj: s.traj, period: metricsEvery},
		&advisoryStream{s: s, period: advisoryEvery},
		&heartbeatStream{run: s.run, period: heartbeatEvery, now: time.Now},
	}
}

// runStream sends the meta when it changed and each page the phases and GPU buckets that changed in its
// window. It is asked at every store change.
type runStream struct {
	run     runReader
	compute computeReader
	sent    float64 // data edge up to which deltas were sent
	metaV   uint64  // meta version last sent
}

func (*runStream) every() time.Duration { return 0 }

func (r *runStream) greet() ([]byte, bool) {
	return liveMessage{Type: "meta", Data: r.run.Meta()}.encode(), false
}

func (r *runStream) deltas() ([]byte, func(*subscription) []byte) {
	to := r.run.Edge()
	from := r.sent
	r.sent = math.Max(r.sent, to)
	var meta []byte
	if v := r.run.MetaVersion(); v != r.metaV {
		r.metaV = v
		meta = liveMessage{Type: "meta", Data: r.run.Meta()}.encode()
	}
	return meta, func(sub *subscription) []byte { return r.delta(sub, from, to) }
}

// laneDelta is the data of a "delta" message.
type laneDelta struct {
	T0       float64             `json:"t0"`
	T1       float64             `json:"t1"`
	DataEdge float64             `json:"data_edge"`
	Phases   *store.PhasesResult `json:"phases"`
	GPU      *store.GPUResult    `json:"gpu"`
}

// delta computes what changed inside a page's window: the phases and GPU buckets of [from, to] (phases from
// a little earlier, since a phase that began before and just closed must replace its open marker).
func (r *runStream) delta(sub *subscription, from, to float64) []byte {
	if sub == nil || to <= from {
		return nil
	}
	t0, t1 := from-60, to
	if sub.FollowS <= 0 && sub.T0 != nil && sub.T1 != nil {
		t0, t1 = math.Max(t0, *sub.T0), math.Min(t1, *sub.T1)
	}
	if t1 <= t0 {
		return nil
	}
	if t1-t0 > store.WindowCap {
		t0 = t1 - store.WindowCap
	}
	lanes, _, err := r.run.Lanes(sub.Lanes)
	if err != nil {
		return nil
	}
	points := sub.Points
	if points <= 0 {
		points = 1000
	}
	width := math.Max(sub.FollowS, 60)
	if sub.T0 != nil && sub.T1 != nil {
		width = *sub.T1 - *sub.T0
	}
	n := int(math.Max(2, math.Min(4000, math.Ceil((t1-t0)/width*float64(points)))))
	return liveMessage{Type: "delta", Data: laneDelta{
		T0: t0, T1: t1, DataEdge: to,
		Phases: r.compute.Phases(t0, t1, lanes),
		GPU:    r.compute.GPU(t0, t1, lanes, n, []string{"util", "mem_mb"}),
	}}.encode()
}

// maxPushPoints: above this many changed points since the last push, pages are told to re-fetch instead.
const maxPushPoints = 20000

// metricsStream sends the step metrics, keys and consumed steps that grew, to every page whatever it
// subscribed to. Pages fetch their data over HTTP once their socket is open, so the first page starts the
// cursor: pushes carry what changed after it connected.
type metricsStream struct {
	metrics metricsReader
	traj    trajectoryReader
	period  time.Duration

	mu       sync.Mutex
	started  bool
	cursor   uint64
	keys     map[string]bool
	lastStep int
}

func (m *metricsStream) every() time.Duration { return m.period }

func (m *metricsStream) greet() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return nil, false
	}
	// Only what is cheap: the metrics stream (the compute view must not pay for engine hours or the trajectory
	// index it never shows).
	m.started = true
	m.cursor = m.metrics.MetricsCursor()
	m.keys = map[string]bool{}
	for _, k := range m.metrics.StepMetricKeys() {
		m.keys[k.Key] = true
	}
	m.lastStep = math.MinInt
	if steps, ok := m.traj.LifecycleStepsIfIndexed(); ok {
		for _, st := range steps {
			m.lastStep = max(m.lastStep, st.Step)
		}
	}
	return nil, false
}

// metricPoints is one key's new points, in step order.
type metricPoints struct {
	X store.Floats `json:"x"`
	Y store.Floats `json:"y"`
}

// metricsDelta is the data of a "metrics" message.
type metricsDelta struct {
	NewKeys []store.MetricKey        `json:"new_keys"`
	Points  map[string]*metricPoints `json:"points"`
	Steps   []store.StepSummary      `json:"steps"`
	Refetch bool                     `json:"refetch"`
}

// deltas sends what grew since the last push. A page may receive points it already fetched (points replace by
// (key, step): receiving one twice is harmless); when the log has moved on by more than maxPushPoints the
// message says refetch instead.
func (m *metricsStream) deltas() ([]byte, func(*subscription) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return nil, nil // no page ever connected
	}
	changes, cursor, ok := m.metrics.MetricChangesSince(m.cursor, maxPushPoints)
	m.cursor = cursor
	var newKeys []store.MetricKey
	for _, k := range m.metrics.StepMetricKeys() {
		if !m.keys[k.Key] {
			m.keys[k.Key] = true
			newKeys = append(newKeys, k)
		}
	}
	var steps []store.StepSummary
	all, _ := m.traj.LifecycleStepsIfIndexed() // consumed steps once a lifecycle view or the advisory indexed them
	for _, s := range all {
		if s.Step > m.lastStep {
			steps = append(steps, s)
		}
	}
	if len(steps) > 0 {
		m.lastStep = steps[len(steps)-1].Step
	}
	if len(changes) == 0 && len(newKeys) == 0 && len(steps) == 0 && ok {
		return nil, nil
	}
	points := map[string]*metricPoints{}
	add := func(k string, x, y float64) {
		p := points[k]
		if p == nil {
			p = &metricPoints{}
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
	msg := liveMessage{Type: "metrics", Data: metricsDelta{
		NewKeys: nz(newKeys), Points: points, Steps: nz(steps),
		Refetch: !ok,
	}}
	return msg.encode(), nil
}

// advisoryStream sends the advisory when it differs from the last one sent, and to a new page at once. The
// live advisory uses the run's settings without query overrides and the whole run.
type advisoryStream struct {
	s      *Server
	period time.Duration

	mu    sync.Mutex
	last  []byte // the last advisory message sent
	force bool   // a page connected: send even if unchanged
}

func (a *advisoryStream) every() time.Duration { return a.period }

func (a *advisoryStream) greet() ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.force = true
	return a.last, true
}

func (a *advisoryStream) deltas() ([]byte, func(*subscription) []byte) {
	cfg, err := a.s.advisoryConfig(nil)
	if err != nil {
		return nil, nil
	}
	msg := liveMessage{Type: "advisory", Data: a.s.advisoryResult(cfg, nil)}.encode()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.force && bytes.Equal(a.last, msg) {
		return nil, nil
	}
	a.force, a.last = false, msg
	return msg, nil
}

// heartbeat is the data of a "heartbeat" message: the server's clock and the run's data edge (0: no stream
// data yet), so a page measures the data's age on the server's clock, not its own; and for a sharded run each
// shard's edge and last write, so a page tells a stalled shard (the others go on) from a stalled run (the
// edge itself ages).
type heartbeat struct {
	Now      float64             `json:"now"`
	DataEdge float64             `json:"data_edge"`
	Shards   []store.ShardStatus `json:"shards,omitempty"`
}

// heartbeatStream sends the heartbeat to a new page at once and to every page each period, whether or not the
// run changed: a stalled collector changes nothing, and its pages must still see the data age.
type heartbeatStream struct {
	run    runReader
	period time.Duration
	now    func() time.Time
}

func (h *heartbeatStream) every() time.Duration { return h.period }

// ticks: the hub asks this stream at every tick, not only after a store change.
func (h *heartbeatStream) ticks() bool { return true }

func (h *heartbeatStream) message() []byte {
	return liveMessage{Type: "heartbeat", Data: heartbeat{
		Now: float64(h.now().UnixMilli()) / 1000, DataEdge: h.run.Edge(), Shards: h.run.Shards(),
	}}.encode()
}

func (h *heartbeatStream) greet() ([]byte, bool) { return h.message(), false }

func (h *heartbeatStream) deltas() ([]byte, func(*subscription) []byte) { return h.message(), nil }
