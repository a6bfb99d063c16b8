// Package nvmlreceiver reads NVIDIA GPU telemetry through NVML and emits it as OTLP metrics, one resource per
// device, with the names of docs/semconv.md §6.
//
// Beyond NVML's coarse utilization.gpu ("some kernel ran", which reads ~100 % on NCCL-bound jobs) it reads the
// GPM metrics of Hopper and later GPUs: SM activity, SM occupancy, tensor activity and DRAM bandwidth.
//
// It degrades and never dies:
//   - no libnvidia-ml.so, no driver, no GPU, or a binary built without cgo: one warning, the receiver stays idle
//     and the collector runs on (Start never fails, and never blocks on NVML);
//   - a device that fails mid-run (reset, fallen off the bus): skipped, with a capped number of warnings, and
//     picked up again (by UUID, whatever its new index) when it answers;
//   - a value a device does not provide (GPM before Hopper, ECC off, no NVLink): that metric is absent for that
//     device, with one log line.
//
// Data flow: controller tick → gpuScraper.scrape → per device: read (NVML via gpulib) → record (MetricsBuilder)
// → EmitForResource(device resource) → next consumer.
package nvmlreceiver // import "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver"
