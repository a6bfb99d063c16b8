package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
)

// fillRunDir runs the receiver's scraper over fake GPUs into the real jsonl exporter, as gpu-check.sh runs the
// collector, and returns the run directory.
func fillRunDir(t *testing.T, fake *gpulibtest.Fake, scrapes int) string {
	t.Helper()
	ctx := context.Background()
	f := nvmlreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*nvmlreceiver.Config)
	cfg.HostName = "gpu-host"
	sc, err := nvmlreceiver.NewScraper(receivertest.NewNopSettings(f.Type()), cfg, fake)
	require.NoError(t, err)
	require.NoError(t, sc.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, sc.Shutdown(ctx)) }()

	dir := t.TempDir()
	ef := jsonlexporter.NewFactory()
	ecfg := ef.CreateDefaultConfig().(*jsonlexporter.Config)
	ecfg.Directory = dir
	exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(ef.Type()), ecfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, componenttest.NewNopHost()))
	for range scrapes {
		fake.Advance()
		md, err := sc.ScrapeMetrics(ctx)
		require.NoError(t, err)
		require.NoError(t, exp.ConsumeMetrics(ctx, md))
	}
	require.NoError(t, exp.Shutdown(ctx))
	return dir
}

func run(t *testing.T, in input) (string, string, int) {
	t.Helper()
	summary, rep, err := check(in)
	require.NoError(t, err)
	return summary, strings.Join(rep.lines, "\n"), rep.failures
}

func TestHealthyH200Node(t *testing.T) {
	dir := fillRunDir(t, gpulibtest.NewH200Node(8), 30)
	summary, body, failures := run(t, input{runDir: dir, seconds: 30, expectGPUs: 8})
	t.Logf("verdict:\n%s\n%s", summary, body)
	assert.Zero(t, failures, body)
	assert.Equal(t, "gpu-check PASS — 8 GPUs found (8 expected from nvidia-smi): NVIDIA H200 ×8", summary)
	assert.Contains(t, body, "GPM      : present on 8/8 GPUs")
	assert.Contains(t, body, "metrics  : all 10 core fields on 8/8 GPUs")
	assert.Contains(t, body, "records  : 30–30 gpu_util rows per GPU")
	assert.Contains(t, body, "nvlink_rx 8/8")
	assert.Contains(t, body, "log      : no warning")
}

func TestA100WithoutGPMPasses(t *testing.T) {
	dir := fillRunDir(t, gpulibtest.New(gpulibtest.NewH200(0), gpulibtest.NewA100(1)), 20)
	_, body, failures := run(t, input{runDir: dir, seconds: 20})
	assert.Zero(t, failures, body)
	assert.Contains(t, body, "GPM      : present on 1/2 GPUs")
	assert.Contains(t, body, "pcie_rx 1/2")
}

func TestHopperWithoutGPMFails(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	fake.FailMethod(fake.GPU(1), gpulibtest.MGPMMetrics, &gpulib.Error{Op: "nvmlGpmSampleGet", Msg: "Not Supported", Kind: gpulib.ErrNotSupported})
	dir := fillRunDir(t, fake, 10)
	summary, body, failures := run(t, input{runDir: dir, seconds: 10})
	assert.Equal(t, 1, failures, body)
	assert.True(t, strings.HasPrefix(summary, "gpu-check FAIL (1)"), summary)
	assert.Contains(t, body, "FAIL GPM      : present on 1/2 GPUs")
	assert.Contains(t, body, "absent on Hopper-class [gpu-host:1]")
}

func TestMissingDeviceAndShortRunFail(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	fake.SetLost(fake.GPU(7), true) // lost from the start: never enumerated
	dir := fillRunDir(t, fake, 5)
	_, body, failures := run(t, input{runDir: dir, seconds: 30, expectGPUs: 8})
	assert.Equal(t, 2, failures, body)
	assert.Contains(t, body, "FAIL devices  : 7 GPUs found (8 expected from nvidia-smi)")
	assert.Contains(t, body, "too few")
}

func TestOutOfRangeValuesFail(t *testing.T) {
	dir := t.TempDir()
	util := filepath.Join(dir, "dashboard", "gpu_util")
	require.NoError(t, os.MkdirAll(util, 0o755))
	lines := []string{
		`{"ts":1.0,"node":"n1","gpu":0,"util":87,"mem_mb":70123,"mem_total_mb":143771,"mem_util":31,"power_w":512.3,"energy_j":1000,"temp_c":61,"sm_clock":1980,"mem_clock":3201,"throttle":0}`,
		`{"ts":2.0,"node":"n1","gpu":0,"util":150,"mem_mb":70123,"mem_total_mb":143771,"mem_util":31,"power_w":512.3,"energy_j":900,"temp_c":61,"sm_clock":1980,"mem_clock":3201,"throttle":0}`,
		`{"ts":3.0,"node":"n1","gpu":0,"util":50,"mem_mb":170123,"mem_total_mb":143771,"mem_util":31,"power_w":512.3,"energy_j":1100,"temp_c":61,"sm_clock":1980,"mem_clock":3201,"throttle":0}`,
		`{"ts":4.0,"node":"n1","gpu":0,"util":50,"mem_mb":70`, // torn tail: ignored
	}
	require.NoError(t, os.WriteFile(filepath.Join(util, "20260301_12.jsonl"), []byte(strings.Join(lines, "\n")), 0o644))
	_, body, failures := run(t, input{runDir: dir, seconds: 3})
	assert.Equal(t, 1, failures, body)
	assert.Contains(t, body, "n1:0 energy_j: counter went back from 1000 to 900")
	assert.Contains(t, body, "n1:0 mem_mb: 170123 MiB used > 143771 MiB total")
	assert.Contains(t, body, "n1:0 util: 150 outside 0–100")
}

func TestCollectorLogAndExit(t *testing.T) {
	dir := fillRunDir(t, gpulibtest.NewH200Node(1), 4)
	log := "2026-03-01T12:00:00.000Z\tinfo\tnvmlreceiver\tNVML ready\t{\"otelcol.component.id\": \"nvml\"}\n" +
		"2026-03-01T12:00:05.000Z\twarn\tnvmlreceiver\tGPU failed; skipping it until it answers again\t{\"otelcol.component.id\": \"nvml\"}\n" +
		"2026-03-01T12:00:05.000Z\twarn\totlpreceiver\tsomething else\n"
	_, body, failures := run(t, input{runDir: dir, seconds: 4, logText: log})
	assert.Zero(t, failures, body)
	assert.Contains(t, body, "log      : 1 warning(s) from the nvml receiver, first: 2026-03-01T12:00:05.000Z\twarn\tnvmlreceiver\tGPU failed")

	_, body, failures = run(t, input{
		runDir: t.TempDir(), seconds: 4, exited: true,
		logText: "Error: failed to get config: cannot unmarshal the configuration: unknown type: \"nvml\"\n",
	})
	assert.Equal(t, 2, failures, body)
	assert.Contains(t, body, "FAIL devices  : no gpu_util record at all")
	assert.Contains(t, body, `unknown type: "nvml"`)
}
