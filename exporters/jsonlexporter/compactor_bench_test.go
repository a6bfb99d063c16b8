package jsonlexporter

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// BenchmarkCompactHour compresses one gpu_util hour of MILES_COMPACT_BENCH_MB plain MiB (default 64; a 1024-GPU
// hour at 1 s is ~1500) and reports the compaction's peak RSS growth (Linux VmHWM, reset just before) and the
// bytes it allocated: the compactor streams, so both stay flat as the hour grows (BENCHMARKS.md "Compaction").
//
//	MILES_COMPACT_BENCH_MB=512 go test -run '^$' -bench BenchmarkCompactHour -benchtime 1x ./exporters/jsonlexporter/
func BenchmarkCompactHour(b *testing.B) {
	mb := 64
	if s := os.Getenv("MILES_COMPACT_BENCH_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("MILES_COMPACT_BENCH_MB=%q: want a positive integer", s)
		}
		mb = n
	}
	hour := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	for _, late := range []bool{false, true} {
		name := "first"
		if late {
			name = "late_into_compressed"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			part := newPartitioner(filepath.Join(dir, runfiles.DashboardDir), osFS{}, 4, "never")
			cmp, err := newCompactor(filepath.Join(dir, runfiles.DashboardDir), time.Minute, part, func(error) {})
			if err != nil {
				b.Fatal(err)
			}
			defer cmp.close()
			streamDir := runfiles.StreamDir(dir, sc.StreamGPUUtil)
			if err := os.MkdirAll(streamDir, 0o755); err != nil {
				b.Fatal(err)
			}
			plain := filepath.Join(streamDir, runfiles.HourName(hour)+runfiles.PlainExt)
			var peak, alloc, zst float64
			for range b.N {
				b.StopTimer()
				if late {
					// The hour is compressed already; a late plain file of the same size joins it.
					writeGPUHour(b, plain, hour, mb)
					if err := cmp.compress(sc.StreamGPUUtil, runfiles.Partition{Hour: hour, Plain: plain}); err != nil {
						b.Fatal(err)
					}
				}
				from := hour
				if late {
					from = hour.Add(time.Second) // other readings than the hour's: records to add, not a crash's leftover
				}
				written := writeGPUHour(b, plain, from, mb)
				p := runfiles.Partition{Hour: hour, Plain: plain}
				if late {
					p.Compressed = strings.TrimSuffix(plain, runfiles.PlainExt) + runfiles.CompressedExt
				}
				runtime.GC()
				resetPeakRSS(b)
				base := vmKB(b, "VmRSS:")
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				b.SetBytes(written)
				b.StartTimer()
				if err := cmp.compress(sc.StreamGPUUtil, p); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				peak = max(peak, float64(vmKB(b, "VmHWM:")-base)/1024)
				alloc = max(alloc, float64(ms1.TotalAlloc-ms0.TotalAlloc)/(1<<20))
				if fi, err := os.Stat(p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt); err == nil {
					zst = float64(fi.Size()) / (1 << 20)
				}
				if err := os.Remove(p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(mb), "hour-MiB")
			b.ReportMetric(peak, "peak-rss-growth-MiB")
			b.ReportMetric(alloc, "alloc-MiB")
			b.ReportMetric(zst, "zst-MiB")
		})
	}
}

// writeGPUHour writes about mb MiB of gpu_util records (the shape the exporter writes, values varying as real
// readings do, so the ratio is not flattering) to path and returns the bytes written.
func writeGPUHour(b *testing.B, path string, hour time.Time, mb int) int64 {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	var line bytes.Buffer
	for i := 0; n < int64(mb)<<20; i++ {
		t := float64(hour.Unix()) + float64(i/1024)*3600/float64(1+(mb<<20)/(1024*400))
		line.Reset()
		fmt.Fprintf(&line, `{"t":%.3f,"node":"sim-node-%d","gpu":%d,"uuid":"GPU-%08x-0000-0000-0000-000000000000","util":%d,"mem_util":%d,"mem_mb":%d,"power_w":%.1f,"temp_c":%d,"sm_clock_mhz":%d,"mem_clock_mhz":2619,"sm_active":%.3f,"tensor_active":%.3f,"dram_active":%.3f,"pcie_tx_mbs":%.1f,"pcie_rx_mbs":%.1f,"nvlink_tx_mbs":%.1f,"nvlink_rx_mbs":%.1f}`+"\n",
			t, (i%1024)/8, i%8, i%1024, (i*37)%101, (i*13)%101, 40000+(i*7919)%100000, 300+float64((i*31)%400)/3, 40+(i%35), 1500+(i*17)%480,
			float64((i*53)%1000)/1000, float64((i*71)%1000)/1000, float64((i*29)%1000)/1000,
			float64((i*97)%20000)/7, float64((i*89)%20000)/7, float64((i*83)%90000)/3, float64((i*79)%90000)/3)
		k, err := w.Write(line.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		n += int64(k)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return n
}

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux clear_refs "5").
func resetPeakRSS(b *testing.B) {
	b.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS (needs Linux /proc/self/clear_refs): %v", err)
	}
}

// vmKB reads one kB field of /proc/self/status.
func vmKB(b *testing.B, field string) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s%s: %v", field, rest, err)
			}
			return v
		}
	}
	b.Fatalf("%s not in /proc/self/status", field)
	return 0
}
