package server

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// stalledDial opens a live socket that will never be read, with a small receive buffer so the server's side
// fills after little data (as a page frozen in a background tab, or a hostile script, does after more).
func stalledDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		return c, err
	}}
	c, _, err := d.Dial(strings.Replace(url, "http", "ws", 1)+"/api/v1/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitSubscribed waits until n connected pages have subscribed (the hub has read their subscribe message), so a
// test's next file write is sent to them as a delta; a fixed sleep is too short on a loaded machine.
func waitSubscribed(t *testing.T, srv *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		subscribed := 0
		for _, c := range srv.hub.clientList() {
			if c.subscription() != nil {
				subscribed++
			}
		}
		if subscribed >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages subscribed after 30 s", subscribed, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// edgeReader follows one page's deltas and reports each data edge it reaches.
func edgeReader(c *websocket.Conn) <-chan float64 {
	edges := make(chan float64, 1024)
	go func() {
		defer close(edges)
		for {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			var m struct {
				Type string
				Data struct {
					DataEdge float64 `json:"data_edge"`
				}
			}
			if json.Unmarshal(b, &m) == nil && m.Type == "delta" {
				edges <- m.Data.DataEdge
			}
		}
	}()
	return edges
}

// TestLiveFiftyStalledPages: 50 pages that subscribe and never read do not delay the live updates of a page
// that reads (its latency from a file write to the delta that carries it, compared with the same page alone:
// a ratio, not a wall time), what each stalled page holds queued stays within its bounds at every moment, and
// every stalled page is dropped once its socket stops draining.
func TestLiveFiftyStalledPages(t *testing.T) {
	dir := fixture(t, 16)
	ts, st, srv := serve(t, dir, Options{})
	srv.hub.writeWait = 300 * time.Millisecond
	path := filepath.Join(dir, "dashboard/gpu_util/20261204_16.jsonl")
	good := dial(t, ts, ts.URL)
	readType(t, good, "meta", 5*time.Second)
	if err := good.WriteJSON(map[string]any{"type": "subscribe", "view": "compute", "lanes": "all", "follow_s": 900}); err != nil {
		t.Fatal(err)
	}
	edges := edgeReader(good)
	waitSubscribed(t, srv, 1)
	next := 600
	// update appends one second of readings and returns how long the reading page took to see it.
	update := func() time.Duration {
		t.Helper()
		start := time.Now()
		writeFile(t, path, gpuLines(next, next+1, 16), true)
		next++
		st.Refresh()
		want := h0 + float64(next-1)
		for {
			select {
			case e, ok := <-edges:
				if !ok {
					t.Fatal("the reading page's socket closed")
				}
				if e >= want {
					return time.Since(start)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the reading page never saw data edge +%.0f s", want-h0)
			}
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	var alone []time.Duration
	for range 25 {
		alone = append(alone, update())
	}

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, heapMax := ms.HeapAlloc, ms.HeapAlloc
	const stalledPages = 50
	for range stalledPages {
		c := stalledDial(t, ts.URL)
		// The finest resolution over a short trailing window: the largest deltas, so the sockets fill fast.
		if err := c.WriteJSON(map[string]any{"type": "subscribe", "view": "compute", "lanes": "all", "follow_s": 60, "points": 4000}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(srv.hub.clientList()) <= stalledPages && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(srv.hub.clientList()); n != stalledPages+1 {
		t.Fatalf("%d pages connected, want %d", n, stalledPages+1)
	}
	waitSubscribed(t, srv, stalledPages+1)

	var crowded []time.Duration
	maxMsgs, maxBytes := 0, 0
	floodEnd := time.Now().Add(60 * time.Second)
	for (len(srv.hub.clientList()) > 1 || len(crowded) < 25) && time.Now().Before(floodEnd) {
		crowded = append(crowded, update())
		for _, c := range srv.hub.clientList() {
			m, b := c.pending()
			maxMsgs, maxBytes = max(maxMsgs, m), max(maxBytes, b)
		}
		runtime.ReadMemStats(&ms)
		heapMax = max(heapMax, ms.HeapAlloc)
	}
	left := len(srv.hub.clientList()) - 1
	ratio := float64(median(crowded)) / float64(median(alone))
	t.Logf("reading page: median latency %s alone, %s beside %d stalled pages (ratio %.2f, %d updates); stalled pages' queues at most %d messages, %d bytes; heap +%d MiB at most; %d not dropped",
		median(alone), median(crowded), stalledPages, ratio, len(crowded), maxMsgs, maxBytes, (heapMax-heap0)>>20, left)
	if left != 0 {
		t.Errorf("%d of %d stalled pages still connected after %d updates", left, stalledPages, len(crowded))
	}
	if maxMsgs > clientQueue || maxBytes > clientQueueBytes {
		t.Errorf("a stalled page held %d messages, %d bytes (bounds %d, %d)", maxMsgs, maxBytes, clientQueue, clientQueueBytes)
	}
	// Generous: the box is shared; what this guards against is the reader waiting on the stalled pages
	// (before the hub's non-blocking queues, one stalled page held every other page for its write timeout).
	if ratio > 8 {
		t.Errorf("the reading page's median latency grew %.1f× beside %d stalled pages", ratio, stalledPages)
	}
}

// TestLiveSameSubscriptionsShareOneDelta: pages that subscribed alike are sent the same delta, computed once
// (the message is the same slice), and a page waiting for its resync is computed none.
func TestLiveSameSubscriptionsShareOneDelta(t *testing.T) {
	h := &hub{clients: map[*client]struct{}{}, writeWait: writeTimeout}
	sub := func(follow float64) *subscription {
		t0 := 5.0
		return &subscription{Type: "subscribe", View: "compute", Lanes: "all", FollowS: follow, T0: &t0}
	}
	var cs []*client
	for i := range 6 {
		c := &client{out: make(chan []byte, clientQueue), closed: make(chan struct{}), sub: sub(float64(60 * (1 + i%2)))}
		cs = append(cs, c)
		h.clients[c] = struct{}{}
	}
	cs[5].resync = true
	calls := 0
	h.ask(&streamLoop{stream: fakeStream{each: func(s *subscription) []byte {
		calls++
		b, _ := json.Marshal(s.FollowS)
		return b
	}}})
	if calls != 2 {
		t.Fatalf("%d computations for 2 distinct subscriptions", calls)
	}
	for i, c := range cs[:5] {
		m := <-c.out
		if want := map[bool]string{true: "60", false: "120"}[i%2 == 0]; string(m) != want {
			t.Fatalf("page %d got %s, want %s", i, m, want)
		}
	}
	if len(cs[5].out) != 0 {
		t.Fatal("a page waiting for its resync was sent a delta")
	}
}

type fakeStream struct{ each func(*subscription) []byte }

func (fakeStream) every() time.Duration                           { return 0 }
func (fakeStream) greet() ([]byte, bool)                          { return nil, false }
func (f fakeStream) deltas() ([]byte, func(*subscription) []byte) { return nil, f.each }
