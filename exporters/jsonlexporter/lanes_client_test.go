package jsonlexporter

import (
	"context"
	"net"
	"strconv"
	"testing"

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
