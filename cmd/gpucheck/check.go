// Command gpucheck reads the run directory that scripts/gpu-check.sh filled by running otelcol-miles with the
// nvml receiver and the jsonl exporter, and prints a compact verdict: devices found, metrics present, GPM
// present or not, values in range. It exits 1 when something is wrong.
//
// It reads the files of docs/semconv.md §8 (gpu_util and gpu_processes streams, lane_catalog.json), so it
// checks the receiver through the real pipeline, not through its own API.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Fields of a gpu_util record (docs/semconv.md §6), by how they are checked.
var (
	requiredFields = []string{
		"util", "mem_mb", "mem_total_mb", "mem_util", "power_w", "energy_j", "temp_c",
		"sm_clock", "mem_clock", "throttle",
	}
	optionalFields = []string{"pcie_rx", "pcie_tx", "nvlink_rx", "nvlink_tx", "ecc_corr", "ecc_uncorr", "xid"}
	gpmFields      = []string{"sm_active", "sm_occupancy", "tensor_active", "dram_active"}
	percentFields  = []string{"util", "mem_util", "sm_active", "sm_occupancy", "tensor_active", "dram_active"}
	counterFields  = []string{"energy_j", "pcie_rx", "pcie_tx", "nvlink_rx", "nvlink_tx", "ecc_corr", "ecc_uncorr", "xid"}
)

// bounds are plausible ranges (inclusive) beyond the percentages.
var bounds = map[string][2]float64{
	"power_w":      {1, 1500},
	"temp_c":       {1, 110},
	"sm_clock":     {1, 4000},
	"mem_clock":    {1, 30000},
	"mem_total_mb": {1024, 1 << 22},
}

// hopperOrLater are model-name fragments of GPUs that have GPM.
var hopperOrLater = []string{"H100", "H200", "H800", "H20", "GH200", "B100", "B200", "B300", "GB200", "GB300", "RTX PRO 6000"}

type input struct {
	runDir     string
	logText    string
	seconds    float64
	expectGPUs int  // 0: unknown
	exited     bool // the collector was gone before the end of the run
}

type lane struct {
	key     string // node:gpu
	uuid    string
	model   string
	rows    int
	fields  map[string]int // rows carrying the field
	last    map[string]float64
	badVals map[string]string // field → first problem
}

type report struct {
	lines    []string
	failures int
}

func (r *report) ok(format string, a ...any) {
	r.lines = append(r.lines, "  "+fmt.Sprintf(format, a...))
}

func (r *report) fail(format string, a ...any) {
	r.failures++
	r.lines = append(r.lines, "  FAIL "+fmt.Sprintf(format, a...))
}

// check builds the verdict. The first line is the summary; the report has failures when the run is bad.
func check(in input) (string, *report, error) {
	rep := &report{}
	dash := filepath.Join(in.runDir, "dashboard")
	lanes := map[string]*lane{}
	var order []string
	utilBytes, values := int64(0), 0
	err := readStream(dash, "gpu_util", func(line []byte) error {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("gpu_util: %w", err)
		}
		key := fmt.Sprintf("%v:%v", rec["node"], rec["gpu"])
		l := lanes[key]
		if l == nil {
			l = &lane{key: key, fields: map[string]int{}, last: map[string]float64{}, badVals: map[string]string{}}
			lanes[key] = l
			order = append(order, key)
		}
		l.rows++
		utilBytes += int64(len(line) + 1)
		for k, v := range rec {
			if k == "ts" || k == "node" || k == "gpu" {
				continue
			}
			values++
			l.fields[k]++
			f, isNum := v.(float64)
			if !isNum {
				l.bad(k, fmt.Sprintf("not a number: %v", v))
				continue
			}
			l.checkValue(k, f)
		}
		if mem, ok := rec["mem_mb"].(float64); ok {
			if total, ok := rec["mem_total_mb"].(float64); ok && mem > total {
				l.bad("mem_mb", fmt.Sprintf("%.0f MiB used > %.0f MiB total", mem, total))
			}
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	procRows, procBytes := 0, int64(0)
	if err := readStream(dash, "gpu_processes", func(line []byte) error {
		procRows++
		procBytes += int64(len(line) + 1)
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("gpu_processes: %w", err)
		}
		if mb, ok := rec["mem_mb"].(float64); !ok || mb < 0 {
			rep.fail("gpu_processes: bad mem_mb in %s", line)
		}
		return nil
	}); err != nil {
		return "", nil, err
	}
	readCatalog(dash, lanes)
	sort.Slice(order, func(i, j int) bool { return laneLess(order[i], order[j]) })

	// Devices.
	models := map[string]int{}
	for _, k := range order {
		models[lanes[k].model]++
	}
	var modelList []string
	for m, n := range models {
		name := m
		if name == "" {
			name = "unknown model"
		}
		modelList = append(modelList, fmt.Sprintf("%s ×%d", name, n))
	}
	sort.Strings(modelList)
	devices := fmt.Sprintf("%d GPUs found", len(order))
	if in.expectGPUs > 0 {
		devices += fmt.Sprintf(" (%d expected from nvidia-smi)", in.expectGPUs)
	}
	if len(modelList) > 0 {
		devices += ": " + strings.Join(modelList, ", ")
	}
	switch {
	case len(order) == 0:
		rep.fail("devices  : no gpu_util record at all")
	case in.expectGPUs > 0 && len(order) != in.expectGPUs:
		rep.fail("devices  : %s", devices)
	}

	// Cadence: one row per GPU per second (1 s collection interval), minus start-up.
	if len(order) > 0 {
		minRows, maxRows := math.MaxInt, 0
		for _, k := range order {
			minRows, maxRows = min(minRows, lanes[k].rows), max(maxRows, lanes[k].rows)
		}
		msg := fmt.Sprintf("records  : %d–%d gpu_util rows per GPU in %.0f s (1 s interval)", minRows, maxRows, in.seconds)
		if float64(minRows) < in.seconds/2 {
			rep.fail("%s: too few", msg)
		} else {
			rep.ok("%s", msg)
		}
	}

	// Metrics present.
	if len(order) > 0 {
		var missing, partial []string
		for _, f := range requiredFields {
			n := lanesWith(lanes, order, f)
			switch {
			case n == 0:
				missing = append(missing, f)
			case n < len(order):
				partial = append(partial, fmt.Sprintf("%s %d/%d", f, n, len(order)))
			}
		}
		if len(missing)+len(partial) > 0 {
			rep.fail("metrics  : missing %v, partial %v", missing, partial)
		} else {
			rep.ok("metrics  : all %d core fields on %d/%d GPUs", len(requiredFields), len(order), len(order))
		}
		var opt []string
		for _, f := range optionalFields {
			opt = append(opt, fmt.Sprintf("%s %d/%d", f, lanesWith(lanes, order, f), len(order)))
		}
		rep.ok("optional : %s", strings.Join(opt, ", "))
	}

	// GPM.
	if len(order) > 0 {
		with, hopperWithout := 0, []string{}
		for _, k := range order {
			l := lanes[k]
			has := true
			for _, f := range gpmFields {
				has = has && l.fields[f] > 0
			}
			if has {
				with++
			} else if isHopperOrLater(l.model) {
				hopperWithout = append(hopperWithout, k)
			}
		}
		msg := fmt.Sprintf("GPM      : present on %d/%d GPUs (%s)", with, len(order), strings.Join(gpmFields, ", "))
		if len(hopperWithout) > 0 {
			rep.fail("%s; absent on Hopper-class %v (see the collector log for why)", msg, hopperWithout)
		} else {
			rep.ok("%s", msg)
		}
	}

	// Ranges.
	if len(order) > 0 {
		var bad []string
		for _, k := range order {
			fs := make([]string, 0, len(lanes[k].badVals))
			for f := range lanes[k].badVals {
				fs = append(fs, f)
			}
			sort.Strings(fs)
			for _, f := range fs {
				bad = append(bad, fmt.Sprintf("%s %s: %s", k, f, lanes[k].badVals[f]))
			}
		}
		if len(bad) > 0 {
			if len(bad) > 6 {
				bad = append(bad[:6], fmt.Sprintf("… %d more", len(bad)-6))
			}
			rep.fail("ranges   : %s", strings.Join(bad, "; "))
		} else {
			rep.ok("ranges   : ok (percentages 0–100, power, temperature, clocks, memory ≤ total, counters monotonic)")
		}
		var notes []string
		for _, k := range order {
			l := lanes[k]
			if l.last["ecc_uncorr"] > 0 {
				notes = append(notes, fmt.Sprintf("%s: %.0f uncorrected ECC errors", k, l.last["ecc_uncorr"]))
			}
			if l.last["xid"] > 0 {
				notes = append(notes, fmt.Sprintf("%s: %.0f XID events", k, l.last["xid"]))
			}
		}
		if len(notes) > 0 {
			rep.ok("health   : %s", strings.Join(notes, "; "))
		}
	}

	rep.ok("processes: %d gpu_processes rows", procRows)
	if values > 0 {
		rep.ok("disk     : %.1f B per GPU value (gpu_util + gpu_processes, plain JSONL; %d gpu_util values)",
			float64(utilBytes+procBytes)/float64(values+procRows), values)
	}

	// Collector log.
	warns := receiverWarnings(in.logText)
	switch {
	case in.exited:
		rep.fail("collector: exited before the end of the run; last log lines:\n%s", indent(lastLines(in.logText, 8)))
	case len(warns) > 0:
		rep.ok("log      : %d warning(s) from the nvml receiver, first: %s", len(warns), warns[0])
	default:
		rep.ok("log      : no warning from the nvml receiver")
	}

	verdict := "PASS"
	if rep.failures > 0 {
		verdict = fmt.Sprintf("FAIL (%d)", rep.failures)
	}
	return fmt.Sprintf("gpu-check %s — %s", verdict, devices), rep, nil
}

func (l *lane) bad(field, why string) {
	if _, seen := l.badVals[field]; !seen {
		l.badVals[field] = why
	}
}

func (l *lane) checkValue(k string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		l.bad(k, "not finite")
		return
	}
	for _, p := range percentFields {
		if k == p && (v < 0 || v > 100) {
			l.bad(k, fmt.Sprintf("%g outside 0–100", v))
		}
	}
	if b, ok := bounds[k]; ok && (v < b[0] || v > b[1]) {
		l.bad(k, fmt.Sprintf("%g outside %g–%g", v, b[0], b[1]))
	}
	for _, c := range counterFields {
		if k == c {
			if prev, seen := l.last[k]; seen && v < prev {
				l.bad(k, fmt.Sprintf("counter went back from %g to %g", prev, v))
			}
			if v < 0 {
				l.bad(k, fmt.Sprintf("negative counter %g", v))
			}
		}
	}
	l.last[k] = v
}

func lanesWith(lanes map[string]*lane, order []string, field string) int {
	n := 0
	for _, k := range order {
		if lanes[k].fields[field] > 0 {
			n++
		}
	}
	return n
}

func isHopperOrLater(model string) bool {
	for _, m := range hopperOrLater {
		if strings.Contains(model, m) {
			return true
		}
	}
	return false
}

// laneLess orders node:gpu keys by node, then numerically by gpu.
func laneLess(a, b string) bool {
	ia, ib := strings.LastIndexByte(a, ':'), strings.LastIndexByte(b, ':')
	if a[:ia] != b[:ib] {
		return a[:ia] < b[:ib]
	}
	// A key without a numeric gpu sorts as gpu 0.
	ga, _ := strconv.Atoi(a[ia+1:])
	gb, _ := strconv.Atoi(b[ib+1:])
	return ga < gb
}

// readStream calls fn for every complete line of a stream, closed hours (.jsonl.zst) first.
func readStream(dash, stream string, fn func([]byte) error) error {
	dir := filepath.Join(dash, stream)
	zst, _ := filepath.Glob(filepath.Join(dir, "*.jsonl.zst"))
	plain, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	sort.Strings(zst)
	sort.Strings(plain)
	for _, f := range append(zst, plain...) {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f, ".zst") {
			dec, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
			if err != nil {
				return err
			}
			data, err = io.ReadAll(dec)
			dec.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1] // a trailing partial line is still being written
		} else {
			data = nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			if err := fn(sc.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

// readCatalog fills uuid and model from lane_catalog.json (docs/semconv.md §8.2).
func readCatalog(dash string, lanes map[string]*lane) {
	data, err := os.ReadFile(filepath.Join(dash, "lane_catalog.json"))
	if err != nil {
		return
	}
	var cat struct {
		Lanes map[string]struct {
			UUID  string `json:"uuid"`
			Model string `json:"model"`
		} `json:"lanes"`
	}
	if json.Unmarshal(data, &cat) != nil {
		return
	}
	for k, v := range cat.Lanes {
		if l := lanes[k]; l != nil {
			l.uuid, l.model = v.UUID, v.Model
		}
	}
}

// receiverWarnings returns the collector's warn/error lines that come from the nvml receiver.
func receiverWarnings(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		lower := strings.ToLower(line)
		if !strings.Contains(lower, "nvml") {
			continue
		}
		if strings.Contains(lower, "\twarn\t") || strings.Contains(lower, "\terror\t") ||
			strings.Contains(lower, `"level":"warn"`) || strings.Contains(lower, `"level":"error"`) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return "      " + strings.ReplaceAll(s, "\n", "\n      ") }
