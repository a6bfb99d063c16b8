package server

import (
	"testing"
	"time"
)

// TestLiveHeartbeat: with nothing changing in the run (a stalled collector), every page still gets the server's
// clock and the data edge, on connect and then each period, so its freshness text keeps aging.
func TestLiveHeartbeat(t *testing.T) {
	dir := fixture(t, 4)
	ts, st, _ := serve(t, dir, Options{HeartbeatEvery: 50 * time.Millisecond})
	c := dial(t, ts, "")
	edge := st.Edge()
	if edge <= 0 {
		t.Fatalf("fixture has no data edge: %v", edge)
	}
	var nows []float64
	for len(nows) < 3 {
		m := readType(t, c, "heartbeat", 5*time.Second)
		d := m["data"].(map[string]any)
		if d["data_edge"].(float64) != edge {
			t.Fatalf("heartbeat edge %v, run edge %v", d["data_edge"], edge)
		}
		now := d["now"].(float64)
		if wall := float64(time.Now().UnixMilli()) / 1000; now < wall-5 || now > wall+1 {
			t.Fatalf("heartbeat now %v, wall clock %v", now, wall)
		}
		nows = append(nows, now)
	}
	if !(nows[2] > nows[0]) {
		t.Fatalf("heartbeats do not advance: %v", nows)
	}
}
