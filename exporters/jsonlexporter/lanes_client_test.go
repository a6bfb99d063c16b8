package jsonlexporter

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// clientCtx is the context a receiver hands on for a request from ip.
func clientCtx(ip string) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// floodTraces is one request of phases on nodes flood-0…flood-(n-1), each on GPUs 0-63: 64 new lanes a node.
func floodTraces(prefix string, nodes int) ptrace.Traces {
	td := ptrace.NewTraces()
	gpus := make([]int64, 64)
	for i := range gpus {
		gpus[i] = int64(i)
	}
	for n := range nodes {
		phaseSpan(td, prefix+strconv.Itoa(n), "actor_train", byte(n%250+1), gpus)
	}
	return td
}

// TestNewLanesBoundedPerClient: one client (one peer address) adds at most maxLanesPerClient lanes to the lane
// catalog; past it its new lanes are refused and counted (over_limit) while its known lanes keep being updated,
// so a flood from one address cannot fill the catalog and a node that joins later, from its own address, gets
// its lanes (docs/semconv.md §8.4).
func TestNewLanesBoundedPerClient(t *testing.T) {
	e, dir := testExporter(t, nil)
	nodes := maxLanesPerClient/64 + 4 // 4 nodes' worth of lanes over the bound
	if err := e.pushTraces(clientCtx("203.0.113.5"), floodTraces("flood-", nodes)); err != nil {
		t.Fatal(err)
	}
	if err := e.pushTraces(clientCtx("10.0.0.7"), floodTraces("real-", 1)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	lanes := catalogLanes(t, dir)
	flood, later := 0, 0
	for k := range lanes {
		switch {
		case len(k) > 6 && k[:6] == "flood-":
			flood++
		case len(k) > 5 && k[:5] == "real-":
			later++
		}
	}
	if flood > maxLanesPerClient {
		t.Errorf("one client added %d lanes, bound %d", flood, maxLanesPerClient)
	}
	if later != 64 {
		t.Errorf("the later node from its own address has %d of its 64 lanes", later)
	}
	if got := e.tel.overLimitItems.Load(); got != int64(nodes*64-maxLanesPerClient) {
		t.Errorf("over_limit %d, want the %d lanes over the client's bound", got, nodes*64-maxLanesPerClient)
	}
}

// TestLaneFloodFromManyClientsFallsIdle: a flood spread over many client addresses, each within
// maxLanesPerClient, fills the lane catalog; a node that joins then gets no lane (refused, counted). Once the
// flood's lanes have gone laneIdleEvict without a record naming them, the full catalog drops them (counted) and
// the node gets its 64 lanes, while a node that kept reporting meanwhile keeps its own (docs/semconv.md §8.4).
func TestLaneFloodFromManyClientsFallsIdle(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.MaxPast = 0 })
	now := base
	e.now = func() time.Time { return now }
	push := func(ip string, td ptrace.Traces) {
		t.Helper()
		if err := e.pushTraces(clientCtx(ip), td); err != nil {
			t.Fatal(err)
		}
	}
	count := func(prefix string) int {
		t.Helper()
		flush(t, e)
		n := 0
		for k := range catalogLanes(t, dir) {
			if strings.HasPrefix(k, prefix) {
				n++
			}
		}
		return n
	}
	push("10.0.0.6", floodTraces("steady-", 1))
	clients := maxLanes/maxLanesPerClient + 1
	for c := range clients {
		push("203.0.113."+strconv.Itoa(c+1), floodTraces("flood-"+strconv.Itoa(c)+"-", maxLanesPerClient/64))
	}
	flooded := count("flood-")
	if flooded+64 != maxLanes {
		t.Fatalf("%d flood lanes beside the steady node's 64, want the catalog full (%d)", flooded, maxLanes)
	}
	push("10.0.0.7", floodTraces("late-", 1))
	if n := count("late-"); n != 0 {
		t.Fatalf("the late node got %d lanes from a full catalog before any lane fell idle", n)
	}
	now = base.Add(laneIdleEvict / 2)
	push("10.0.0.6", floodTraces("steady-", 1)) // the steady node keeps reporting
	now = base.Add(laneIdleEvict + time.Second)
	push("10.0.0.7", floodTraces("late-", 1))
	if n := count("late-"); n != 64 {
		t.Errorf("the late node has %d of its 64 lanes after the flood fell idle", n)
	}
	if n := count("steady-"); n != 64 {
		t.Errorf("the steady node has %d of its 64 lanes", n)
	}
	if n := count("flood-"); n != 0 {
		t.Errorf("%d idle flood lanes still in the catalog", n)
	}
	if got := e.tel.evictedLanes.Load(); got != int64(flooded) {
		t.Errorf("lanes_evicted %d, want the %d idle flood lanes", got, flooded)
	}
}
