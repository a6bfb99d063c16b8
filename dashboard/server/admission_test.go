package server

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// heldStore is a run whose GPU queries wait for release, counting how many run at once.
type heldStore struct {
	*store.Store
	running, most atomic.Int64
	arrived       chan struct{}
	release       chan struct{}
}

func (h *heldStore) GPU(t0, t1 float64, sel []*store.Lane, points int, fields []string) *store.GPUResult {
	n := h.running.Add(1)
	for m := h.most.Load(); n > m; m = h.most.Load() {
		if h.most.CompareAndSwap(m, n) {
			break
		}
	}
	h.arrived <- struct{}{}
	<-h.release
	defer h.running.Add(-1)
	return h.Store.GPU(t0, t1, sel, points, fields)
}

// TestAdmissionBoundsConcurrentQueries: however many queries arrive at once, at most the admission limit are
// answered at a time, across every server that shares it (a library's runs), so what queries hold in memory is
// bounded by the limit, not by the clients (docs/operations.md "Memory"); the others wait their turn and all are
// answered.
func TestAdmissionBoundsConcurrentQueries(t *testing.T) {
	st, err := store.Open(fixture(t, 8), true)
	if err != nil {
		t.Fatal(err)
	}
	const limit, clients = 3, 40
	held := &heldStore{Store: st, arrived: make(chan struct{}, clients), release: make(chan struct{})}
	adm := NewAdmission(limit)
	var urls []string
	for range 2 { // two runs of one library share the admission
		srv := New(Options{Store: held, Admission: adm})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { ts.Close(); srv.Close() })
		urls = append(urls, ts.URL)
	}
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := range clients {
		wg.Go(func() { codes[i], _ = get(t, urls[i%2]+"/api/v1/gpu") })
	}
	for range limit { // the first queries are admitted...
		<-held.arrived
	}
	for range clients - limit { // ...and each further one only when one of them ends
		held.release <- struct{}{}
		<-held.arrived
	}
	close(held.release)
	wg.Wait()
	if m := held.most.Load(); m > limit {
		t.Errorf("%d queries answered at once, admission limit %d", m, limit)
	}
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("client %d: HTTP %d", i, c)
		}
	}
}
