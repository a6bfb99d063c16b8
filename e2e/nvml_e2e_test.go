package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestNVMLReceiverWithoutGPUE2E: the distribution with the nvml receiver enabled (configs/run.yaml) starts on a
// machine without libnvidia-ml.so or GPUs, warns exactly once, and keeps serving OTLP into the run directory.
// On a GPU machine it instead finds devices (scripts/gpu-check.sh covers that case).
func TestNVMLReceiverWithoutGPUE2E(t *testing.T) {
	runDir := t.TempDir()
	// A fake sglang engine in the targets file: its scrapes (every 2 s) are the clock the "warns once" check
	// waits on, so the collector has run several of the nvml receiver's 1 s intervals however loaded the machine.
	eng := startEngine(t, fakesglang.Config{}, 1)
	writeTargets(t, runDir, []map[string]any{target(eng.Addr(), 0)})
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	e2etest.Eventually(t, 60*time.Second, "the nvml receiver's start-up verdict", func() bool {
		l := c.Logs()
		return strings.Contains(l, "NVML unavailable") || strings.Contains(l, "no NVIDIA GPU found") ||
			strings.Contains(l, `"otelcol.component.id": "nvml"`) && strings.Contains(l, "GPU")
	})
	sendSteps(t, c.HTTPAddr, 0, 10)
	e2etest.Eventually(t, 60*time.Second, "OTLP still served", func() bool {
		return len(e2etest.Records(t, runDir, sc.StreamMetrics)) == 10
	})
	// Several scrape intervals: the warning must not repeat.
	n := scrapes(engineRecords(t, runDir), eng.URL())
	waitFor(t, runDir, 60*time.Second, "two more scrapes of the engine", func(recs []map[string]any) bool {
		return scrapes(recs, eng.URL()) >= n+2
	})
	logs := c.Logs()
	if n := strings.Count(logs, "NVML unavailable"); n > 1 {
		t.Errorf("NVML warning logged %d times, want once", n)
	}
	if strings.Contains(logs, "NVML unavailable") && len(e2etest.Records(t, runDir, sc.StreamGPUUtil)) != 0 {
		t.Error("gpu_util records written without NVML")
	}
}
