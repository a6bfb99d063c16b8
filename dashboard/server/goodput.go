package server

import (
	"math"
	"net/http"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// goodput answers GET /api/v1/goodput: the goodput ledger of the trainer steps in the window, per fleet
// (docs/dashboard-api.md; the rules in docs/semconv.md §12).
func (s *Server) goodput(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	return s.compute.Goodput(t0, t1), nil
}

// goodputCache is the whole run's ledger totals for /metrics, computed again only when the data changed.
type goodputCache struct {
	mu    sync.Mutex
	key   string
	total []store.GoodputFleet
}

// goodputTotal is the whole run's ledger, per fleet.
func (s *Server) goodputTotal() []store.GoodputFleet {
	c := &s.goodputRun
	c.mu.Lock()
	defer c.mu.Unlock()
	key := versionKey(s.run.DataVersion())
	if c.total == nil || c.key != key {
		c.total, c.key = s.compute.Goodput(0, math.MaxFloat64/4).Total, key
	}
	return c.total
}

// weightSync answers GET /api/v1/weight_sync: the weight updates ending in the window, the trainer's side beside
// each engine's own sync calls (docs/dashboard-api.md; docs/semconv.md §2 "Engine phases").
func (s *Server) weightSync(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	return s.compute.WeightSync(t0, t1), nil
}
