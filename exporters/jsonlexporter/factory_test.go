package jsonlexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter/internal/metadata"
)

// TestOneInstanceForAllSignals: the three signals of one component share one writer (one set of files), and
// the files are flushed when the last of them shuts down.
func TestOneInstanceForAllSignals(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = t.TempDir()
	ctx := context.Background()
	set := exportertest.NewNopSettings(metadata.Type)
	te, err := f.CreateTraces(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	me, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	le, err := f.CreateLogs(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	instances.Lock()
	n := len(instances.m)
	instances.Unlock()
	if n != 1 {
		t.Fatalf("%d exporter instances for one config, want 1", n)
	}
	host := componenttest.NewNopHost()
	if err := te.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := me.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := le.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := te.ConsumeTraces(ctx, phaseTraces()); err != nil {
		t.Fatal(err)
	}
	if err := me.ConsumeMetrics(ctx, gpuMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := le.ConsumeLogs(ctx, topologyAndOpenLogs()); err != nil {
		t.Fatal(err)
	}
	if err := te.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := me.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Two signals still or already stopped: a log push still lands.
	if err := le.ConsumeLogs(ctx, topologyAndOpenLogs()); err != nil {
		t.Fatal(err)
	}
	if err := le.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"phases", "gpu_util", "topology"} {
		entries, _ := os.ReadDir(filepath.Join(cfg.Directory, "dashboard", stream))
		if len(entries) == 0 {
			t.Errorf("stream %s empty after shutdown: data was not flushed", stream)
		}
	}
	// The records are from 13:00 and the clock is real, so that hour may already be compressed: count both forms.
	if got := countRecords(t, cfg.Directory, "topology"); got != 2 {
		t.Errorf("topology has %d records, want 2", got)
	}
	instances.Lock()
	n = len(instances.m)
	instances.Unlock()
	if n != 0 {
		t.Errorf("%d instances left after the last shutdown", n)
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = t.TempDir()
	te, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := te.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
