package server

import (
	"net/http"
	"sync"
	"time"

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

// goodputCache is the ledger totals /metrics shows, computed again when the data changed, at most every
// goodputEvery: a live run's data changes on every scrape, and a scrape must not cost a ledger each time.
type goodputCache struct {
	mu    sync.Mutex
	key   string
	at    time.Time
	total []store.GoodputFleet
}

const goodputEvery = 30 * time.Second

// goodputTotal is the ledger of the default window (the run's last 4 hours to its data edge, as the API's
// default), per fleet.
func (s *Server) goodputTotal() []store.GoodputFleet {
	c := &s.goodputRun
	c.mu.Lock()
	defer c.mu.Unlock()
	key := versionKey(s.run.DataVersion())
	if c.total != nil && (c.key == key || time.Since(c.at) < goodputEvery) {
		return c.total
	}
	t0, t1, err := s.run.Window(nil, nil)
	if err != nil {
		return c.total
	}
	c.total, c.key, c.at = s.compute.Goodput(t0, t1).Total, key, time.Now()
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
