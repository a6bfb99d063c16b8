package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// TestAgentStoppedWithBacklogE2E: an agent whose gateway is unreachable acknowledges its clients' spans, is
// stopped (SIGTERM) with them still queued, and started again on the same run directory once the gateway is up:
// every acknowledged span reaches the gateway's files. The agent's per-gateway queues live in a file (file_storage,
// docs/reliability.md "Agent stopped with a backlog"), so a stop, or a kill, keeps them for the next start.
func TestAgentStoppedWithBacklogE2E(t *testing.T) {
	gwAddr := e2etest.FreeAddr(t) // nothing listens here until the gateway starts below
	agentDir := t.TempDir()
	agentOpts := e2etest.Options{
		Configs: []string{e2etest.Config("agent.yaml")},
		Env:     []string{"MILES_GATEWAYS=" + gwAddr, "MILES_NODE=node-a"},
	}
	agent := e2etest.StartCollector(t, agentDir, agentOpts)
	const requests, spans = 3, 40
	for i := range requests {
		if code := postOTLP(t, agent.HTTPAddr, tracesJSON(t, phaseSpans("node-a", byte(i+1), spans, nil))); code != http.StatusOK {
			t.Fatalf("agent answered request %d with HTTP %d", i, code)
		}
	}
	// The batches have left the batch processor and met the unreachable gateway at least once.
	e2etest.Eventually(t, 30*time.Second, "the agent's first export attempt", func() bool {
		return agent.Metric("otelcol_loadbalancer_backend_outcome") > 0
	})
	// The backlog shows on the agent's metrics, on the gateway's own exporter.
	gwExporter := `exporter="otlp_grpc/traces_` + gwAddr + `"`
	if n := agent.Metric("otelcol_exporter_queue_size", gwExporter); n == 0 {
		t.Errorf("the gateway's queue is empty on the agent's metrics, with a backlog waiting")
	}
	agent.Stop(t)

	gwDir := t.TempDir()
	startGateway(t, gwDir, "", gwAddr)
	agent = e2etest.StartCollector(t, agentDir, agentOpts)
	e2etest.Eventually(t, 20*time.Second, "every acknowledged span at the gateway", func() bool {
		return phaseCount(t, gwDir) >= requests*spans
	})
	if n := phaseCount(t, gwDir); n != requests*spans {
		t.Errorf("%d phases at the gateway, want %d", n, requests*spans)
	}
	e2etest.Eventually(t, 10*time.Second, "the gateway's exporter's sends on the agent's metrics", func() bool {
		return agent.Metric("otelcol_exporter_sent_spans", gwExporter) == requests*spans
	})
}
