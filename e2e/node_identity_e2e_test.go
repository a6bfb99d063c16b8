package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// identityNode is one simulated machine: its host name, the address miles' topology gives it, its GPUs' UUIDs
// (whether the topology reports them) and the node name its trainer's emitter uses.
type identityNode struct {
	host, ip    string
	topoUUIDs   bool
	trainerNode string
}

// gpuReadings is what the NVML receiver of node n sends: one resource per GPU with host.name, host.ip and the
// UUID (docs/semconv.md §6).
func gpuReadings(n identityNode, now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for g := range 2 {
		rm := md.ResourceMetrics().AppendEmpty()
		r := rm.Resource().Attributes()
		r.PutStr(sc.HostName, n.host)
		r.PutEmptySlice(sc.HostIP).AppendEmpty().SetStr(n.ip)
		r.PutStr(sc.HWID, fmt.Sprintf("GPU-%s-%d", n.host, g))
		r.PutStr(sc.HWModel, "NVIDIA H100")
		r.PutInt(sc.GPUIndex, int64(g))
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(sc.MetricGPUUtilization)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
		dp.SetDoubleValue(0.5)
	}
	return md
}

// topologyOf is the rollout manager's snapshot: one engine per node on its two GPUs, named as miles names them
// (by IP, with UUIDs where topoUUIDs).
func topologyOf(nodes []identityNode, now time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(sc.HostName, nodes[0].host)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(sc.EventTopology)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(now))
	engines := lr.Body().SetEmptyMap().PutEmptySlice("engines")
	for i, n := range nodes {
		e := engines.AppendEmpty().SetEmptyMap()
		e.PutStr("addr", "http://"+n.ip+":30000")
		e.PutStr("worker_type", "regular")
		e.PutInt("engine_rank", int64(i))
		gpus, uuids := e.PutEmptySlice("gpus"), e.PutEmptySlice("gpu_uuids")
		for g := range 2 {
			p := gpus.AppendEmpty().SetEmptySlice()
			p.AppendEmpty().SetStr(n.ip)
			p.AppendEmpty().SetInt(int64(g))
			u := ""
			if n.topoUUIDs {
				u = fmt.Sprintf("GPU-%s-%d", n.host, g)
			}
			uuids.AppendEmpty().SetStr(u)
		}
	}
	return ld
}

// trainerPhase is one closed phase of the train rank on GPU 1 of node n, named as its emitter names it.
func trainerPhase(n identityNode, rank uint8, now time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.HostName, n.trainerNode)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("actor_train")
	s.SetTraceID(pcommon.TraceID{rank + 1, 1})
	s.SetSpanID(pcommon.SpanID{rank + 1, 2})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-10 * time.Second)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	a := s.Attributes()
	a.PutStr(sc.SpanType, sc.SpanTypePhase)
	a.PutStr(sc.PhaseName, "actor_train")
	a.PutStr(sc.Role, "train")
	a.PutInt(sc.Rank, int64(rank))
	a.PutEmptySlice(sc.GPUIDs).AppendEmpty().SetInt(1)
	return td
}

// TestNodeIdentityE2E: miles names engine nodes by IP, NVML and the emitters by host name (docs/semconv.md §1.1).
// Through the real collectors — one node behind the single-node config, and two nodes behind their agents and
// two gateway shards — the dashboard shows one lane per GPU: the engine lanes are the GPU lanes, joined by UUID
// (node a) or by the node's address (node b, whose topology has no UUIDs and whose trainer names it by IP).
func TestNodeIdentityE2E(t *testing.T) {
	nodes := []identityNode{
		{host: "host-a", ip: "10.0.0.2", topoUUIDs: true, trainerNode: "host-a"},
		{host: "host-b", ip: "10.0.0.3", trainerNode: "10.0.0.3"},
	}
	post := func(addr, path string, body []byte) {
		t.Helper()
		if code, msg := postJSON(t, "http://"+addr+path, body, "application/json"); code != 200 {
			t.Fatalf("POST %s: %d %s", path, code, msg)
		}
	}
	send := func(addrs []string) {
		now := time.Now()
		for i, n := range nodes {
			post(addrs[i], "/v1/metrics", mustBody(t)((&pmetric.JSONMarshaler{}).MarshalMetrics(gpuReadings(n, now))))
			post(addrs[i], "/v1/traces", mustBody(t)((&ptrace.JSONMarshaler{}).MarshalTraces(trainerPhase(n, uint8(2*i+1), now))))
		}
		post(addrs[0], "/v1/logs", mustBody(t)((&plog.JSONMarshaler{}).MarshalLogs(topologyOf(nodes, now))))
	}
	want := strings.Join([]string{
		"host-a:0 engines=[http://10.0.0.2:30000] roles=[rollout] ranks=[]",
		"host-a:1 engines=[http://10.0.0.2:30000] roles=[rollout train] ranks=[1]",
		"host-b:0 engines=[http://10.0.0.3:30000] roles=[rollout] ranks=[]",
		"host-b:1 engines=[http://10.0.0.3:30000] roles=[rollout train] ranks=[3]",
	}, "\n")

	t.Run("one_collector", func(t *testing.T) {
		dir := t.TempDir()
		c := e2etest.StartCollector(t, dir, e2etest.Options{})
		send([]string{c.HTTPAddr, c.HTTPAddr})
		c.Stop(t)
		checkIdentityLanes(t, dir, want)
	})
	t.Run("agents_and_gateways", func(t *testing.T) {
		dir := t.TempDir()
		var gws []*e2etest.Collector
		var gwAddrs []string
		for _, id := range []string{"gw-0", "gw-1"} {
			addr := e2etest.FreeAddr(t)
			gws = append(gws, startGateway(t, dir, id, addr))
			gwAddrs = append(gwAddrs, addr)
		}
		var agents []*e2etest.Collector
		var addrs []string
		for _, n := range nodes {
			a := e2etest.StartCollector(t, dir, e2etest.Options{
				Configs: []string{e2etest.Config("agent.yaml")},
				Env:     []string{"MILES_GATEWAYS=" + strings.Join(gwAddrs, ","), "MILES_NODE=" + n.host},
			})
			agents = append(agents, a)
			addrs = append(addrs, a.HTTPAddr)
		}
		send(addrs)
		for _, a := range agents {
			a.Stop(t)
		}
		for _, g := range gws {
			g.Stop(t)
		}
		checkIdentityLanes(t, dir, want)
	})
}

// mustBody returns the marshaled request body, failing the test on an error.
func mustBody(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func checkIdentityLanes(t *testing.T, dir, want string) {
	t.Helper()
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lanes {
		got = append(got, fmt.Sprintf("%s engines=%v roles=%v ranks=%v", l.Key, l.Engines, l.Roles, l.Ranks))
	}
	if strings.Join(got, "\n") != want {
		t.Fatalf("lanes:\n%s\nwant one per GPU (engine lanes = GPU lanes):\n%s", strings.Join(got, "\n"), want)
	}
}
