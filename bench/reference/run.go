// Package reference writes the run directories the side-by-side benchmark against the Python miles dashboard
// reads (bench/reference/run.sh): a colocate run of nodes × 8 GPUs, every GPU read every second, in either the
// miles v1 layout (what the reference's collector writes) or the otelcol-miles layout (what our collector writes:
// schema 3, gpu_rollup beside gpu_util, closed hours compacted with their span frame). Both layouts hold the same
// readings and phases, so the two dashboards, and our dashboard on the two layouts, answer the same questions.
package reference

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Shape is the run's size and timing.
type Shape struct {
	// Nodes × 8 GPUs are the lanes; every GPU is a train rank and, two by two, an engine's.
	Nodes int
	// Steps are the RL steps, each StepS seconds: rollout for RolloutS, then train.
	Steps    int
	StepS    float64
	RolloutS float64
	// Start is the first reading (Unix seconds); not on an hour boundary, as a real run.
	Start float64
	// Ours writes the otelcol-miles layout; otherwise miles v1.
	Ours bool
}

// Default512 is the reference comparison's run shape (BENCHMARKS.md): 512 lanes, 60 steps of 240 s (4 h 0 min 30 s, ~630 MB in the v1 layout).
func Default512() Shape {
	return Shape{Nodes: 64, Steps: 60, StepS: 240, RolloutS: 120, Start: 1_797_120_000 + 17*60}
}

// End is the last reading's second.
func (s Shape) End() float64 { return s.Start + 30 + float64(s.Steps)*s.StepS }

// Window is what the benchmarks ask: the run's last 4 h (both dashboards' widest window).
func (s Shape) Window() (t0, t1 float64) { return max(s.Start, s.End()-4*3600), s.End() }

const gpusPerNode = 8

// hourFiles appends lines to hourly partitions of the streams.
type hourFiles struct {
	root  *os.Root // the run directory; partition paths are relative to it
	ours  bool
	files map[string]*hourFile
}

type hourFile struct {
	path        string
	fd          *os.File
	w           *bufio.Writer
	first, last float64
}

func (h *hourFiles) line(stream string, ts float64, b []byte) error {
	name := filepath.Join("dashboard", stream, runfiles.HourName(time.Unix(int64(ts), 0).UTC())+".jsonl")
	f := h.files[name]
	if f == nil {
		if err := h.root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		fd, err := h.root.Create(name)
		if err != nil {
			return err
		}
		f = &hourFile{path: name, fd: fd, w: bufio.NewWriterSize(fd, 1<<20), first: ts, last: ts}
		h.files[name] = f
	}
	f.first, f.last = math.Min(f.first, ts), math.Max(f.last, ts)
	_, err := f.w.Write(b)
	return err
}

// close flushes every partition; in our layout every hour is compacted as the collector leaves a finished run:
// .jsonl.zst with the span frame (internal/runfiles/span.go), the plain file removed.
func (h *hourFiles) close() error {
	names := make([]string, 0, len(h.files))
	for n := range h.files {
		names = append(names, n)
	}
	sort.Strings(names)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	for _, n := range names {
		f := h.files[n]
		if err := f.w.Flush(); err != nil {
			return err
		}
		if err := f.fd.Close(); err != nil {
			return err
		}
		if !h.ours {
			continue
		}
		plain, err := h.root.ReadFile(f.path)
		if err != nil {
			return err
		}
		var z []byte
		if filepath.Base(filepath.Dir(f.path)) == sc.StreamGPUUtil {
			var zb bytes.Buffer // node by node, as the collector compacts gpu_util
			if err := runfiles.WriteNodeHour(&zb, enc, bytes.NewReader(plain), int64(len(plain)), runfiles.NodeChunk); err != nil {
				return err
			}
			z = zb.Bytes()
		} else {
			z = enc.EncodeAll(plain, nil)
		}
		z = runfiles.AppendSpan(z, f.first, f.last)
		if err := h.root.WriteFile(f.path+".zst", z, 0o644); err != nil {
			return err
		}
		if err := h.root.Remove(f.path); err != nil {
			return err
		}
	}
	return nil
}

// Write writes the run into dir (created) and returns its size on disk in bytes.
func Write(dir string, s Shape) (int64, error) {
	if err := os.MkdirAll(filepath.Join(dir, "dashboard"), 0o755); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	h := &hourFiles{root: root, ours: s.Ours, files: map[string]*hourFile{}}
	node := func(n int) string { return fmt.Sprintf("10.%d.%d.%d", 1+n/65536, n/256%256, n%256+1) }
	engine := func(n, e int) string { return fmt.Sprintf("http://%s:%d", node(n), 15000+e) }
	schema, writer, catVersion := 1, "", 1
	if s.Ours {
		schema, writer, catVersion = 3, `,"writer":"otelcol-miles","writer_version":"0.1.0"`, 2
	}
	meta := fmt.Sprintf(`{"schema_version":%d%s,"run_name":"ref-%d","start_ts":%.3f,"args":{"colocate":true}}`, schema, writer, s.Nodes*gpusPerNode, s.Start)
	if err := os.WriteFile(filepath.Join(dir, "dashboard/meta.json"), []byte(meta), 0o644); err != nil {
		return 0, err
	}
	cat := []byte(fmt.Sprintf(`{"version":%d,"lanes":{`, catVersion))
	for n := range s.Nodes {
		for g := range gpusPerNode {
			if n+g > 0 {
				cat = append(cat, ',')
			}
			cat = fmt.Appendf(cat, `"%s:%d":{`, node(n), g)
			if s.Ours {
				cat = fmt.Appendf(cat, `"uuid":"GPU-%04d-%d","model":"NVIDIA H200",`, n, g)
			}
			cat = fmt.Appendf(cat, `"ranks":[%d],"engine_addrs":["%s"],"roles":["rollout","train"]}`, n*gpusPerNode+g, engine(n, g/2))
		}
	}
	cat = append(cat, "}}"...)
	if err := os.WriteFile(filepath.Join(dir, "dashboard/lane_catalog.json"), cat, 0o644); err != nil {
		return 0, err
	}
	// Topology: one snapshot at the start, engines of TP 2.
	topo := fmt.Appendf(nil, `{"ts":%.3f,"engines":[`, s.Start)
	for n := range s.Nodes {
		for e := range gpusPerNode / 2 {
			if n+e > 0 {
				topo = append(topo, ',')
			}
			topo = fmt.Appendf(topo, `{"addr":"%s","worker_type":"regular","engine_rank":%d,"gpus":[["%s",%d],["%s",%d]],"gpu_uuids":["GPU-%04d-%d","GPU-%04d-%d"]}`,
				engine(n, e), n*gpusPerNode/2+e, node(n), 2*e, node(n), 2*e+1, n, 2*e, n, 2*e+1)
		}
	}
	topo = append(topo, "]}\n"...)
	if s.Ours {
		if err := h.line("topology", s.Start, topo); err != nil {
			return 0, err
		}
	} else if err := os.WriteFile(filepath.Join(dir, "dashboard/topology.jsonl"), topo, 0o644); err != nil {
		return 0, err
	}
	if err := writePhases(h, s, node); err != nil {
		return 0, err
	}
	if err := writeGPU(h, s, node); err != nil {
		return 0, err
	}
	if err := writeEngines(h, s, engine); err != nil {
		return 0, err
	}
	if err := writeMetrics(h, s, dir); err != nil {
		return 0, err
	}
	if err := h.close(); err != nil {
		return 0, err
	}
	var size int64
	err = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return err
	})
	return size, err
}

// laneTimes are a rank's train phase edges in one step.
type laneTimes struct{ trainStart, trainEnd, updEnd float64 }

// rankTimes is rank r's train phases in step k: every rank waits for the rollout, then trains with a skew of
// up to 8 s (the stragglers the carpet shows), then updates weights.
func rankTimes(s Shape, k, r int) (stepStart float64, lt laneTimes) {
	stepStart = s.Start + 30 + float64(k)*s.StepS
	skew := float64((r*7919+k*31)%800) / 100
	lt.trainStart = stepStart + s.RolloutS + 2 + skew
	lt.trainEnd = stepStart + s.StepS - 20
	lt.updEnd = stepStart + s.StepS - 8
	return stepStart, lt
}

func writePhases(h *hourFiles, s Shape, node func(int) string) error {
	var b []byte
	span := 0
	phase := func(name string, t0, t1 float64, n int, gpus []int, rank int, role string, step int) error {
		b = b[:0]
		b = fmt.Appendf(b, `{"name":"%s","t0":%.6f,"t1":%.6f,"node":"%s","gpus":[`, name, t0, t1, node(n))
		for i, g := range gpus {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(g), 10)
		}
		b = fmt.Appendf(b, `],"rank":%d,"role":"%s"`, rank, role)
		if s.Ours {
			span++
			b = fmt.Appendf(b, `,"step":%d,"span":"%016x"`, step, span)
		}
		b = append(b, "}\n"...)
		return h.line("phases", t1, b) // a phase is written when it ends, into the hour of its end
	}
	for n := range s.Nodes {
		for g := range gpusPerNode {
			r := n*gpusPerNode + g
			if err := phase("initialize", s.Start, s.Start+28, n, []int{g}, r, "train", 0); err != nil {
				return err
			}
		}
	}
	for k := range s.Steps {
		for n := range s.Nodes {
			for g := range gpusPerNode {
				r := n*gpusPerNode + g
				st, lt := rankTimes(s, k, r)
				// Colocate: the engines on the lane generate, then the trainer waits for the last sample and trains.
				for _, p := range []struct {
					name   string
					t0, t1 float64
				}{
					{"generate", st, st + s.RolloutS},
					{"train_wait", st + s.RolloutS, lt.trainStart},
					{"actor_train", lt.trainStart, lt.trainEnd},
					{"update_weights", lt.trainEnd, lt.updEnd},
				} {
					if err := phase(p.name, p.t0, p.t1, n, []int{g}, r, "train", k); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// util is lane (n, g)'s utilization at second t: a step change at each phase boundary, noise within phases.
func util(s Shape, rng *rand.Rand, r int, t float64) int {
	if t < s.Start+30 {
		return 5
	}
	k := int((t - s.Start - 30) / s.StepS)
	if k >= s.Steps {
		return 5
	}
	st, lt := rankTimes(s, k, r)
	switch {
	case t < st+s.RolloutS-float64(r%17): // engines drain at different times: the long tail
		return 60 + rng.IntN(36)
	case t < lt.trainStart:
		return 5
	case t < lt.trainEnd:
		return 97
	case t < lt.updEnd:
		return 40 + rng.IntN(10)
	}
	return 5
}

func writeGPU(h *hourFiles, s Shape, node func(int) string) error {
	rng := rand.New(rand.NewPCG(1, 2))
	lanes := s.Nodes * gpusPerNode
	type roll struct {
		bucket int64
		n      int
		f      [3][4]float64 // util, mem_mb, power_w: min, max, sum, count
	}
	rolls := make([]roll, lanes)
	var b []byte
	flushRoll := func(r, n, g int) error {
		ro := &rolls[r]
		if ro.n == 0 {
			return nil
		}
		b = fmt.Appendf(b[:0], `{"ts":%d,"dt":16,"node":"%s","gpu":%d,"n":%d`, ro.bucket, node(n), g, ro.n)
		for i, name := range []string{"util", "mem_mb", "power_w"} {
			f := ro.f[i]
			b = fmt.Appendf(b, `,"%s":[%g,%g,%g,%g]`, name, f[0], f[1], f[2], f[3])
		}
		b = append(b, "}\n"...)
		ro.n = 0
		return h.line("gpu_rollup", float64(ro.bucket), b)
	}
	for sec := s.Start; sec <= s.End(); sec++ {
		for n := range s.Nodes {
			for g := range gpusPerNode {
				r := n*gpusPerNode + g
				ts := sec + float64(rng.IntN(300000))/1e6 // the sampler's jitter
				u := util(s, rng, r, ts)
				mem := 70000 + rng.IntN(2000)
				if u == 5 {
					mem = 2000 + rng.IntN(100)
				}
				pw := 100 + 6*u + rng.IntN(20)
				b = fmt.Appendf(b[:0], `{"ts":%.6f,"node":"%s","gpu":%d,"util":%d,"mem_mb":%d,"power_w":%d}`+"\n", ts, node(n), g, u, mem, pw)
				if err := h.line("gpu_util", ts, b); err != nil {
					return err
				}
				if !s.Ours {
					continue
				}
				bucket := int64(ts) / 16 * 16
				if ro := &rolls[r]; ro.n > 0 && ro.bucket != bucket {
					if err := flushRoll(r, n, g); err != nil {
						return err
					}
				}
				ro := &rolls[r]
				ro.bucket = bucket
				for i, v := range []float64{float64(u), float64(mem), float64(pw)} {
					if ro.n == 0 || v < ro.f[i][0] {
						ro.f[i][0] = v
					}
					if ro.n == 0 || v > ro.f[i][1] {
						ro.f[i][1] = v
					}
					if ro.n == 0 {
						ro.f[i][2], ro.f[i][3] = 0, 0
					}
					ro.f[i][2] += v
					ro.f[i][3]++
				}
				ro.n++
			}
		}
	}
	for n := range s.Nodes {
		for g := range gpusPerNode {
			if err := flushRoll(n*gpusPerNode+g, n, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeEngines writes two gauges of every engine every 30 s.
func writeEngines(h *hourFiles, s Shape, engine func(n, e int) string) error {
	var b []byte
	for t := s.Start + 1; t <= s.End(); t += 30 {
		k := int((t - s.Start - 30) / s.StepS)
		running := 0
		if k >= 0 && k < s.Steps && t-s.Start-30-float64(k)*s.StepS < s.RolloutS {
			running = 32
		}
		for n := range s.Nodes {
			for e := range gpusPerNode / 2 {
				if s.Ours {
					b = fmt.Appendf(b[:0], `{"ts":%.3f,"addr":"%s","m":{"sglang:num_running_reqs":%d,"sglang:token_usage":%.2f}}`+"\n", t, engine(n, e), running, float64(running)/40)
				} else {
					b = fmt.Appendf(b[:0], `{"ts":%.3f,"addr":"%s","metric":"sglang_num_running_reqs","labels":{},"value":%d}`+"\n", t, engine(n, e), running)
					b = fmt.Appendf(b, `{"ts":%.3f,"addr":"%s","metric":"sglang_token_usage","labels":{},"value":%.2f}`+"\n", t, engine(n, e), float64(running)/40)
				}
				if err := h.line("engine_series", t, b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func writeMetrics(h *hourFiles, s Shape, dir string) error {
	var b []byte
	for k := range s.Steps {
		t := s.Start + 30 + float64(k+1)*s.StepS - 1
		b = fmt.Appendf(b, `{"ts":%.3f,"step_key":"rollout/step","step":%d,"metrics":{"rollout/step":%d,"perf/step_time":%g,"perf/wait_time_ratio":0.1}}`+"\n", t, k, k, s.StepS)
	}
	if s.Ours {
		return h.line("metrics", s.Start, b)
	}
	return os.WriteFile(filepath.Join(dir, "dashboard/metrics.jsonl"), b, 0o644)
}
