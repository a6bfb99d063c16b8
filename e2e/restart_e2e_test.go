package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func sendSteps(t *testing.T, addr string, first, n int) {
	t.Helper()
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("perf/step_time")
	dps := m.SetEmptyGauge().DataPoints()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := first; i < first+n; i++ {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutStr(sc.StepKey, "rollout/step")
		dp.Attributes().PutInt(sc.Step, int64(i))
	}
	body, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	resp, err := http.Post("http://"+addr+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/metrics: %d", resp.StatusCode)
	}
}

// TestCrashAndRestartE2E: a collector killed with SIGKILL (no flush, no fsync) is restarted on the same run
// directory: what reached the files before the crash is intact, meta.json records both starts, new records
// append after the old ones, and every line is a whole record.
func TestCrashAndRestartE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	sendSteps(t, c.HTTPAddr, 0, 100)
	e2etest.Eventually(t, 60*time.Second, "first 100 steps on disk", func() bool {
		return len(e2etest.Records(t, runDir, sc.StreamMetrics)) == 100
	})
	c.Kill()

	c2 := e2etest.StartCollector(t, runDir, e2etest.Options{})
	sendSteps(t, c2.HTTPAddr, 100, 50)
	e2etest.Eventually(t, 60*time.Second, "150 steps on disk", func() bool {
		return len(e2etest.Records(t, runDir, sc.StreamMetrics)) == 150
	})
	c2.Stop(t)
	recs := e2etest.Records(t, runDir, sc.StreamMetrics) // fails the test on any torn or invalid line
	seen := map[float64]bool{}
	for _, r := range recs {
		seen[r["step"].(float64)] = true
	}
	if len(seen) != 150 {
		t.Errorf("%d distinct steps, want 150 (no loss, no duplicates)", len(seen))
	}
	var meta struct {
		SchemaVersion int       `json:"schema_version"`
		Starts        []float64 `json:"starts"`
		StartTS       float64   `json:"start_ts"`
	}
	b, err := os.ReadFile(filepath.Join(runDir, "dashboard", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.SchemaVersion != sc.SchemaVersion || len(meta.Starts) != 2 || meta.StartTS != meta.Starts[0] {
		t.Errorf("meta.json after restart: %s", b)
	}
}
