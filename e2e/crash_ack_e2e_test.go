package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestKillAfterAckLosesNothingE2E: every request configs/run.yaml acknowledged survives a SIGKILL right after the
// acknowledgement. Phase spans, open markers and a topology record go in over OTLP/HTTP; the collector is killed
// the moment the last 200 arrives and restarted on the same run directory. Before, the batch processor and the
// exporter's queue held up to ~1.2 s of acknowledged records in memory (phases left "running", topology lost);
// with ack: written each is in the files when it is acknowledged.
func TestKillAfterAckLosesNothingE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	post := func(path string, body []byte) {
		t.Helper()
		resp, err := http.Post("http://"+c.HTTPAddr+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", path, resp.StatusCode)
		}
	}
	const rounds, perRound = 20, 50
	for i := range rounds {
		post("/v1/traces", guardRequest(t, fmt.Sprintf("node-%d", i), byte(i+1), perRound, 0))
	}
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(sc.HostName, "node-0")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	now := pcommon.NewTimestampFromTime(time.Now())
	marker := lrs.AppendEmpty()
	marker.SetEventName(sc.EventPhaseStart)
	marker.SetTimestamp(now)
	marker.SetTraceID(pcommon.TraceID{0xee, 1})
	marker.SetSpanID(pcommon.SpanID{0xee, 1})
	marker.Attributes().PutStr(sc.PhaseName, "actor_train")
	marker.Attributes().PutStr(sc.Role, "train")
	marker.Attributes().PutInt(sc.Rank, 0)
	marker.Attributes().PutEmptySlice(sc.GPUIDs).AppendEmpty().SetInt(0)
	topo := lrs.AppendEmpty()
	topo.SetEventName(sc.EventTopology)
	topo.SetTimestamp(now)
	eng := topo.Body().SetEmptyMap().PutEmptySlice("engines").AppendEmpty().SetEmptyMap()
	eng.PutStr("addr", "http://10.0.0.2:30000")
	pair := eng.PutEmptySlice("gpus").AppendEmpty().SetEmptySlice()
	pair.AppendEmpty().SetStr("node-0")
	pair.AppendEmpty().SetInt(1)
	b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	post("/v1/logs", b)
	c.Kill() // at once: no flush interval, no batch timeout passes

	phases := len(e2etest.Records(t, runDir, sc.StreamPhases))
	topology := len(e2etest.Records(t, runDir, sc.StreamTopology))
	if phases != rounds*perRound+1 || topology != 1 {
		t.Fatalf("after kill -9: %d phase records (want %d acknowledged), %d topology (want 1)", phases, rounds*perRound+1, topology)
	}
	// The restarted collector appends to the same files.
	c = e2etest.StartCollector(t, runDir, e2etest.Options{})
	post("/v1/traces", guardRequest(t, "node-late", 0x77, 5, 0))
	c.Kill()
	if n := len(e2etest.Records(t, runDir, sc.StreamPhases)); n != rounds*perRound+1+5 {
		t.Fatalf("after the second kill: %d phase records, want %d", n, rounds*perRound+1+5)
	}
}
