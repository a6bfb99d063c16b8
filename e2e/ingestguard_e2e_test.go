package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// phaseSpans is one client's traces of n closed actor_train phase spans on host (rank seed, ids from seed); extra,
// when not nil, adds to span i's attributes.
func phaseSpans(host string, seed byte, n int, extra func(i int, a pcommon.Map)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.HostName, host)
	ss := rs.ScopeSpans().AppendEmpty()
	t0 := time.Now().Add(-time.Minute)
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetName("actor_train")
		s.SetTraceID(pcommon.TraceID{seed, byte(i + 1)})
		s.SetSpanID(pcommon.SpanID{seed, byte(i + 1)})
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
		a := s.Attributes()
		a.PutStr(sc.SpanType, sc.SpanTypePhase)
		a.PutStr(sc.PhaseName, "actor_train")
		a.PutStr(sc.Role, "train")
		a.PutInt(sc.Rank, int64(seed))
		a.PutEmptySlice(sc.GPUIDs).AppendEmpty().SetInt(0)
		if extra != nil {
			extra(i, a)
		}
	}
	return td
}

// guardRequest is one client's OTLP/JSON request of n phase spans on host; deep > 0 nests the first span's extra
// attribute that many arrays deep (the JSON decoder accepts any depth; pdata >= v1.71's protobuf decoder refuses > 49).
func guardRequest(t *testing.T, host string, seed byte, n, deep int) []byte {
	t.Helper()
	td := phaseSpans(host, seed, n, func(i int, a pcommon.Map) {
		if i == 0 && deep > 0 {
			v := a.PutEmpty("miles.e2e.deep")
			for range deep {
				v = v.SetEmptySlice().AppendEmpty()
			}
			v.SetStr("leaf")
		}
	})
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIngestGuardAgentToGatewayE2E: three clients of one node's agent send at once, one of them a span nested
// 200 levels deep. The agent batches them together; without the guard a gateway on pdata >= v1.71 refused the
// whole gRPC batch and the agent dropped everyone's spans as permanent (older pdata passes the deep span on to
// the files and trace backends). With it exactly the deep span is dropped (counted, warned) and the 100 good ones
// reach the gateway's files.
func TestIngestGuardAgentToGatewayE2E(t *testing.T) {
	gwDir := t.TempDir()
	gw := e2etest.StartCollector(t, gwDir, e2etest.Options{Configs: []string{e2etest.Config("gateway.yaml")}})
	agent := e2etest.StartCollector(t, t.TempDir(), e2etest.Options{
		Configs: []string{e2etest.Config("agent.yaml")},
		Env:     []string{"MILES_GATEWAYS=" + gw.GRPCAddr, "MILES_NODE=node-a"},
	})
	reqs := [][]byte{
		guardRequest(t, "node-a", 1, 50, 0),
		guardRequest(t, "node-a", 2, 50, 0),
		guardRequest(t, "node-a", 3, 1, 200),
	}
	var wg sync.WaitGroup
	codes := make([]int, len(reqs))
	for i, body := range reqs {
		wg.Go(func() {
			resp, err := http.Post("http://"+agent.HTTPAddr+"/v1/traces", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("client %d: HTTP %d", i, c)
		}
	}
	e2etest.Eventually(t, 60*time.Second, "the 100 good spans at the gateway", func() bool {
		return phaseCount(t, gwDir) == 100
	})
	e2etest.Eventually(t, 60*time.Second, "the agent's warning", func() bool {
		return strings.Contains(agent.Logs(), "ingestguard: dropped items")
	})
	if logs := agent.Logs(); strings.Contains(logs, "permanent") || strings.Contains(logs, "Dropping data") {
		t.Fatalf("the agent dropped a batch:\n%s", logs)
	}
	// Nothing else arrives later (the deep span is not retried into the files): wait until the agent has
	// accounted for every span it accepted, sent or dropped by the guard, with no export in flight.
	e2etest.Eventually(t, 60*time.Second, "the agent's spans all sent or dropped", func() bool {
		accepted := agent.Metric("otelcol_receiver_accepted_spans")
		sent := agent.Metric("otelcol_exporter_sent_spans", `exporter="load_balancing/traces"`)
		dropped := agent.Metric("otelcol_processor_ingestguard_dropped")
		return accepted == 101 && sent+dropped == accepted && agent.Metric("otelcol_exporter_in_flight_requests") == 0
	})
	if n := phaseCount(t, gwDir); n != 100 {
		t.Fatalf("%d phases at the gateway, want 100", n)
	}
}
