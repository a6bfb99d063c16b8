// Command reliability is the campaign behind `make reliability` (docs/reliability.md): it starts the shipped
// binaries on loopback, breaks them (SIGKILL under load, a full or read-only disk, hostile dashboard requests)
// and prints what it observed, one JSON object per test on stdout and a summary on stderr. It measures; it does
// not decide pass or fail except for "the process could not be driven at all".
//
//	go run ./bench/reliability -out DIR kill|disk|exposure|all
//	go run ./bench/reliability answers CLEAN_RUN KILLED_RUN   (the dashboard's answers compared)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

type options struct {
	out, bin, sim, dash, config string
	kills, nodes                int
	duration                    time.Duration
	speed                       float64
	seed                        int64
	minGap, maxGap              time.Duration
	diskMiB                     int
	hold                        time.Duration
	soakWall                    time.Duration
	dashBudget                  string
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "directory for the run directories and results.jsonl (default: a new temp dir)")
	flag.StringVar(&o.bin, "bin", "bin/otelcol-miles", "collector binary")
	flag.StringVar(&o.sim, "sim", "bin/miles-sim", "simulator binary")
	flag.StringVar(&o.dash, "dashboard", "bin/miles-dashboard", "dashboard binary")
	flag.StringVar(&o.config, "config", "configs/run.yaml", "collector config")
	flag.IntVar(&o.kills, "kills", 20, "kill: SIGKILLs of the collector")
	flag.IntVar(&o.nodes, "nodes", 16, "simulated nodes (8 GPUs each)")
	flag.DurationVar(&o.duration, "duration", 40*time.Minute, "kill: simulated run length")
	flag.Float64Var(&o.speed, "speed", 25, "simulated seconds per wall second")
	flag.Int64Var(&o.seed, "seed", 1, "simulator seed (and kill moments)")
	flag.DurationVar(&o.minGap, "min-gap", 2*time.Second, "kill: shortest time between a restart and the next kill")
	flag.DurationVar(&o.maxGap, "max-gap", 5*time.Second, "kill: longest time between a restart and the next kill")
	flag.IntVar(&o.diskMiB, "disk-mib", 256, "disk: size of the tmpfs run directory (room for the run's data and the queue written back after recovery)")
	flag.DurationVar(&o.hold, "hold", 15*time.Second, "disk: how long the disk stays full / read-only")
	flag.DurationVar(&o.soakWall, "soak", 10*time.Minute, "soak: wall time (the simulated run is -speed times longer)")
	flag.StringVar(&o.dashBudget, "dash-budget", "", "soak: the dashboard's --memory-budget (default: its own default)")
	flag.Parse()
	if o.out == "" {
		d, err := os.MkdirTemp("", "miles-reliability-")
		must(err)
		o.out = d
	}
	must(os.MkdirAll(o.out, 0o755))
	what := flag.Args()
	if len(what) == 3 && what[0] == "answers" { // compare the dashboard's answers on two run directories
		b, _ := json.Marshal(compareAnswers(o, what[1], what[2]))
		fmt.Println(string(b))
		return
	}
	if len(what) == 0 || (len(what) == 1 && what[0] == "all") {
		what = []string{"kill", "disk", "exposure"}
	}
	for _, w := range what {
		if w != "kill" && w != "disk" && w != "exposure" && w != "soak" {
			fmt.Fprintf(os.Stderr, "unknown test %q (kill, disk, exposure, soak, all)\n", w)
			os.Exit(2)
		}
	}
	res, err := os.OpenFile(filepath.Join(o.out, "results.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(err)
	defer res.Close()
	for _, w := range what {
		t0 := time.Now()
		var r map[string]any
		switch w {
		case "kill":
			r = killCampaign(o)
		case "disk":
			r = diskCampaign(o)
		case "soak":
			r = soak(o)
		default:
			r = exposure(o)
		}
		r["test"], r["wall_s"] = w, round(time.Since(t0).Seconds())
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		_, _ = res.Write(append(b, '\n'))
	}
	fmt.Fprintf(os.Stderr, "reliability: results in %s\n", filepath.Join(o.out, "results.jsonl"))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// ---- processes ----

type ports struct{ grpc, http, health, tel string }

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().String()
}

func newPorts() ports { return ports{freeAddr(), freeAddr(), freeAddr(), freeAddr()} }

type collector struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startCollector(o options, runDir string, p ports, logPath string) (*collector, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	_, telPort, _ := net.SplitHostPort(p.tel)
	cmd := exec.Command(o.bin, "--config", o.config)
	cmd.Env = append(os.Environ(), "MILES_RUN_DIR="+runDir, "MILES_OTLP_GRPC_ADDR="+p.grpc, "MILES_OTLP_HTTP_ADDR="+p.http,
		"MILES_HEALTH_ADDR="+p.health, "MILES_TELEMETRY_PORT="+telPort)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	c := &collector{cmd: cmd, log: lf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return nil, fmt.Errorf("collector exited during start-up (log %s)", logPath)
		default:
		}
		if resp, err := http.Get("http://" + p.health + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.kill()
	return nil, fmt.Errorf("collector not healthy within 60 s (log %s)", logPath)
}

func (c *collector) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.log.Close()
}

func (c *collector) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.log.Close()
}

// rssMiB reads VmRSS of pid.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return round(kb / 1024)
		}
	}
	return 0
}

// selfMetric sums the samples of a collector self-metric whose line contains match.
func selfMetric(p ports, name, match string) float64 {
	resp, err := http.Get("http://" + p.tel + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name) && strings.Contains(l, match) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

var simReport = regexp.MustCompile(`sent (\d+) spans, (\d+) log records, (\d+) metric points \((\d+) GPU readings\) in (\d+) requests, [\d.]+ MB; (\d+) retries, (\d+) failed`)

// runSim runs the simulator to its end and returns its final counts.
func runSim(o options, p ports, runDir, start string, nodes int, duration time.Duration) (map[string]int64, error) {
	cmd := exec.Command(o.sim, "--fast-forward", "--mode", "async", "--nodes", strconv.Itoa(nodes),
		"--duration", duration.String(), "--max-speed", strconv.FormatFloat(o.speed, 'f', -1, 64),
		"--seed", strconv.FormatInt(o.seed, 10), "--start", start, "--endpoint", p.http, "--run-dir", runDir,
		"--give-up", "5m", "--quiet")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	m := simReport.FindStringSubmatch(out.String())
	if m == nil {
		return nil, fmt.Errorf("simulator: %w\n%s", err, out.String())
	}
	keys := []string{"spans", "log_records", "metric_points", "gpu_readings", "requests", "retries", "failed"}
	r := map[string]int64{}
	for i, k := range keys {
		r[k], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	return r, err
}

// ---- reading a run directory ----

type streamStats struct {
	Lines, Invalid, PartialTail, Duplicates, PlainFiles, ZstFiles, ZstUnreadable int64
	// Spans and SpanDuplicates count trajectory spans (a record bundles the spans of one trace that arrived
	// together, so record counts vary with how requests were cut; spans do not).
	Spans, SpanDuplicates int64
}

type runStats struct {
	Streams      map[string]*streamStats
	OpenPhases   int64 // markers whose span never closed
	ClosedPhases int64
}

func analyze(runDir string) runStats {
	rs := runStats{Streams: map[string]*streamStats{}}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	must(err)
	defer dec.Close()
	open, closed := map[string]bool{}, map[string]bool{}
	for _, stream := range sc.Streams {
		st := &streamStats{}
		rs.Streams[stream] = st
		seen := map[uint64]int{}
		spans := map[string]int{}
		lines := func(data []byte) {
			for line := range bytes.SplitSeq(data, []byte{'\n'}) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				st.Lines++
				if !json.Valid(line) {
					st.Invalid++
					continue
				}
				h := fnv.New64a()
				h.Write(line)
				k := h.Sum64()
				seen[k]++
				if seen[k] > 1 {
					st.Duplicates++
				}
				if stream == sc.StreamTrajectories {
					var b struct {
						Trace string `json:"trace"`
						Spans []struct {
							Span string `json:"span"`
						} `json:"spans"`
					}
					if json.Unmarshal(line, &b) == nil {
						for _, m := range b.Spans {
							k := b.Trace + m.Span
							spans[k]++
							if spans[k] > 1 {
								st.SpanDuplicates++
							} else {
								st.Spans++
							}
						}
					}
				}
				if stream == sc.StreamPhases {
					var p struct {
						T1   *float64 `json:"t1"`
						Span string   `json:"span"`
					}
					if json.Unmarshal(line, &p) == nil {
						if p.T1 == nil {
							open[p.Span] = true
						} else {
							closed[p.Span] = true
						}
					}
				}
			}
		}
		parts, err := runfiles.ListPartitions(runDir, stream)
		must(err)
		readZst := func(path string) {
			st.ZstFiles++
			z, err := os.ReadFile(path)
			must(err)
			plain, err := dec.DecodeAll(z, nil)
			if err != nil {
				st.ZstUnreadable++
			}
			lines(plain)
		}
		for _, p := range parts {
			if p.Compressed != "" {
				readZst(p.Compressed)
			}
			if p.Plain != "" {
				b, err := os.ReadFile(p.Plain)
				if errors.Is(err, os.ErrNotExist) && p.Compressed == "" {
					// Compacted between the listing and the read (a collector still running compacts closed
					// hours): the same hour is now in its .zst.
					readZst(p.Plain + runfiles.CompressedExt)
					continue
				}
				must(err)
				st.PlainFiles++
				i := bytes.LastIndexByte(b, '\n')
				st.PartialTail += int64(len(b) - (i + 1))
				lines(b[:i+1])
			}
		}
	}
	for s := range open {
		if !closed[s] {
			rs.OpenPhases++
		}
	}
	rs.ClosedPhases = int64(len(closed))
	return rs
}

// ---- kill -9 under load ----

// killCampaign runs the simulator twice from the same seed and start: once into a collector left alone, once
// into one SIGKILLed at random moments and restarted on the same run directory and ports. It reports, per
// stream, the records of both runs, torn and invalid lines (plain and inside .zst), duplicates, the loss, and
// the loss per kill in wall seconds of that stream's data.
func killCampaign(o options) map[string]any {
	start := time.Now().UTC().Add(-o.duration - time.Hour).Truncate(time.Hour).Format(time.RFC3339)
	seed, err := pcgSeed(o.seed)
	must(err)
	rng := rand.New(rand.NewPCG(seed, 7))

	clean := filepath.Join(o.out, "kill-clean", "run")
	p := newPorts()
	c, err := startCollector(o, clean, p, filepath.Join(o.out, "kill-clean.log"))
	must(err)
	t0 := time.Now()
	cleanSent, err := runSim(o, p, clean, start, o.nodes, o.duration)
	must(err)
	cleanWall := time.Since(t0).Seconds()
	c.stop()

	killed := filepath.Join(o.out, "kill-9", "run")
	p = newPorts()
	logPath := filepath.Join(o.out, "kill-9.log")
	c, err = startCollector(o, killed, p, logPath)
	must(err)
	type simResult struct {
		sent map[string]int64
		err  error
	}
	simDone := make(chan simResult, 1)
	t0 = time.Now()
	go func() {
		s, err := runSim(o, p, killed, start, o.nodes, o.duration)
		simDone <- simResult{s, err}
	}()
	kills := 0
	var restartMs []float64
	var sim simResult
	finished := false
	for kills < o.kills && !finished {
		gap := o.minGap + time.Duration(rng.Int64N(int64(o.maxGap-o.minGap)+1))
		select {
		case sim = <-simDone:
			finished = true
			continue
		case <-time.After(gap):
		}
		c.kill()
		kills++
		r0 := time.Now()
		c, err = startCollector(o, killed, p, logPath)
		must(err)
		restartMs = append(restartMs, float64(time.Since(r0).Milliseconds()))
	}
	if !finished {
		sim = <-simDone
	}
	killWall := time.Since(t0).Seconds()
	c.stop()
	must(sim.err)

	a, b := analyze(clean), analyze(killed)
	streams := map[string]any{}
	for _, s := range sc.Streams {
		ca, cb := a.Streams[s], b.Streams[s]
		lost := ca.Lines - cb.Lines
		perKill := 0.0
		if kills > 0 && ca.Lines > 0 {
			perKill = round(float64(lost) / float64(kills) / (float64(ca.Lines) / cleanWall))
		}
		streams[s] = map[string]any{
			"clean": ca.Lines, "killed": cb.Lines, "lost": lost,
			"lost_pct":             round(100 * float64(lost) / float64(max(ca.Lines, 1))),
			"lost_wall_s_per_kill": perKill,
			"invalid":              cb.Invalid, "partial_tail_bytes": cb.PartialTail, "zst_unreadable": cb.ZstUnreadable,
			"duplicates": cb.Duplicates, "duplicates_clean": ca.Duplicates, "zst_files": cb.ZstFiles, "plain_files": cb.PlainFiles,
		}
		if s == sc.StreamTrajectories {
			m := streams[s].(map[string]any)
			m["spans_clean"], m["spans_killed"], m["spans_lost"] = ca.Spans, cb.Spans, ca.Spans-cb.Spans
			m["span_duplicates"] = cb.SpanDuplicates
		}
	}
	sort.Float64s(restartMs)
	answers := compareAnswers(o, clean, killed)
	return map[string]any{
		"dashboard_answers": answers,
		"nodes":             o.nodes, "gpus": o.nodes * 8, "sim_duration": o.duration.String(), "speed": o.speed, "start": start,
		"kills": kills, "gap_s": []float64{o.minGap.Seconds(), o.maxGap.Seconds()},
		"restart_ms_median": median(restartMs), "clean_wall_s": round(cleanWall), "killed_wall_s": round(killWall),
		"sim_sent_clean": cleanSent, "sim_sent_killed": sim.sent,
		"phases_running_clean": a.OpenPhases, "phases_running_killed": b.OpenPhases,
		"streams": streams, "run_dirs": []string{clean, killed},
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// ---- disk full and read-only ----

// diskCampaign mounts a small tmpfs as the run directory (root only; otherwise it reports why it skipped) and,
// while the simulator writes into the collector: fills it, then remounts it read-only, each for -hold, sampling
// the collector's RSS; then starts a fresh collector on a full and on a read-only disk. It reports RSS, the
// error lines logged, drops, whether writing resumed, and torn lines.
func diskCampaign(o options) map[string]any {
	mnt := filepath.Join(o.out, "disk")
	must(os.MkdirAll(mnt, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", o.diskMiB), "tmpfs", mnt).CombinedOutput(); err != nil {
		return map[string]any{"skipped": "cannot mount a tmpfs (needs root): " + strings.TrimSpace(string(out))}
	}
	defer exec.Command("umount", "-l", mnt).Run() //nolint:errcheck
	remount := func(mode string) error {
		out, err := exec.Command("mount", "-o", "remount,"+mode, mnt).CombinedOutput()
		if err != nil {
			return fmt.Errorf("remount %s: %w %s", mode, err, out)
		}
		return nil
	}
	filler := filepath.Join(mnt, "filler")
	fill := func() int64 {
		f, err := os.Create(filler)
		if err != nil {
			return 0
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if err != nil {
				return n
			}
		}
	}
	result := map[string]any{"tmpfs_mib": o.diskMiB, "hold_s": o.hold.Seconds(), "nodes": o.nodes}

	for _, mode := range []string{"full", "read-only"} {
		runDir := filepath.Join(mnt, "run-"+mode)
		p := newPorts()
		logPath := filepath.Join(o.out, "disk-"+mode+".log")
		c, err := startCollector(o, runDir, p, logPath)
		must(err)
		simDone := make(chan error, 1)
		go func() {
			_, err := runSim(o, p, runDir, time.Now().UTC().Add(-30*time.Minute).Format(time.RFC3339), o.nodes, 20*time.Minute)
			simDone <- err
		}()
		time.Sleep(5 * time.Second)
		before := analyze(runDir).Streams[sc.StreamGPUUtil].Lines
		var filled int64
		if mode == "full" {
			filled = fill()
		} else if err := remount("ro"); err != nil {
			// The kernel refuses a read-only remount while a process holds files open for writing (EBUSY); it
			// only does it by itself, on a disk error. What is measurable here is the start on one (below).
			result[mode] = map[string]any{"skipped": err.Error(), "sim_error": fmt.Sprint(<-simDone)}
			c.stop()
			continue
		}
		var peak float64
		deadline := time.Now().Add(o.hold)
		for time.Now().Before(deadline) {
			peak = max(peak, rssMiB(c.cmd.Process.Pid))
			time.Sleep(250 * time.Millisecond)
		}
		during := analyze(runDir).Streams[sc.StreamGPUUtil].Lines // before the disk recovers
		if mode == "full" {
			_ = os.Remove(filler)
		} else {
			must(remount("rw"))
		}
		time.Sleep(4 * time.Second)
		after := analyze(runDir).Streams[sc.StreamGPUUtil].Lines
		dropped := selfMetric(p, "otelcol_exporter_jsonl_dropped", `reason="buffer_full"`)
		resumes := selfMetric(p, "otelcol_exporter_jsonl_write_resumes", "")
		usedMiB := diskUsedMiB(mnt)
		simErr := <-simDone
		c.stop()
		logs, _ := os.ReadFile(logPath)
		st := analyze(runDir)
		var invalid, partial int64
		for _, s := range st.Streams {
			invalid += s.Invalid
			partial += s.PartialTail
		}
		result[mode] = map[string]any{
			"filled_mib": filled >> 20, "rss_peak_mib": peak, "gpu_util_lines_before": before, "during": during, "after_recovery": after,
			"resumed": after > during, "dropped_buffer_full": dropped, "write_resumes": resumes, "disk_used_mib_after": usedMiB,
			"error_lines":   bytes.Count(logs, []byte("cannot write to the run directory")),
			"resumed_lines": bytes.Count(logs, []byte("writing resumed")), "invalid_lines": invalid, "partial_tail_bytes": partial,
			"sim_error": fmt.Sprint(simErr), "phases_records": st.Streams[sc.StreamPhases].Lines, "topology_records": st.Streams[sc.StreamTopology].Lines,
		}
	}

	// Start on a broken disk: a full one, then a read-only one (a fresh run directory that cannot be created).
	for _, mode := range []string{"start-full", "start-read-only"} {
		runDir := filepath.Join(mnt, "run-"+mode)
		for _, old := range []string{"run-full", "run-read-only", "run-start-full"} {
			_ = os.RemoveAll(filepath.Join(mnt, old)) // what the earlier tests wrote would keep the disk full
		}
		if mode == "start-full" {
			fill()
		} else {
			must(remount("ro"))
		}
		p := newPorts()
		logPath := filepath.Join(o.out, "disk-"+mode+".log")
		c, err := startCollector(o, runDir, p, logPath)
		r := map[string]any{"started": err == nil}
		if err == nil {
			simDone := make(chan error, 1)
			go func() {
				_, err := runSim(o, p, runDir, time.Now().UTC().Add(-30*time.Minute).Format(time.RFC3339), 1, 5*time.Minute)
				simDone <- err
			}()
			time.Sleep(3 * time.Second)
			if mode == "start-full" {
				_ = os.Remove(filler)
			} else {
				must(remount("rw"))
			}
			r["sim_error"] = fmt.Sprint(<-simDone)
			time.Sleep(2 * time.Second)
			c.stop()
			_, metaErr := os.Stat(filepath.Join(runDir, runfiles.DashboardDir, runfiles.MetaFile))
			tmps, _ := filepath.Glob(filepath.Join(runDir, runfiles.DashboardDir, "*.tmp"))
			st := analyze(runDir)
			r["meta_written"], r["tmp_files_left"] = metaErr == nil, len(tmps)
			r["phases_records"], r["gpu_util_records"] = st.Streams[sc.StreamPhases].Lines, st.Streams[sc.StreamGPUUtil].Lines
		} else {
			r["error"] = err.Error()
			_ = os.Remove(filler)
			_ = remount("rw")
		}
		result[mode] = r
	}
	return result
}

// pcgSeed is -seed as the seed of the kill moments' PCG; a negative seed is refused rather than wrapped.
func pcgSeed(seed int64) (uint64, error) {
	if seed < 0 {
		return 0, fmt.Errorf("-seed %d: the kill moments are drawn from a seed >= 0", seed)
	}
	return uint64(seed), nil
}

// diskUsedMiB is what the file system at dir holds; a run whose data and written-back queue fill the disk
// again after the filler is gone never logs a resume (that is the disk, not the writer).
func diskUsedMiB(dir string) float64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return -1
	}
	return round(float64(st.Blocks-st.Bfree) * float64(st.Bsize) / (1 << 20))
}

// ---- the dashboard's answers after the kills ----

// answerPaths are the questions compareAnswers asks of each run: the lanes, the phases and the GPU series of
// the whole run (a wide view, answered from the roll-up), the fleet, the idle bubbles, the consumed steps and
// the step metrics. {t0} and {t1} are the run's time range.
var answerPaths = map[string]string{
	"lanes":        "/api/v1/lanes?lanes=all",
	"phases":       "/api/v1/phases?t0={t0}&t1={t1}&lanes=all",
	"gpu_wide":     "/api/v1/gpu?t0={t0}&t1={t1}&lanes=all&points=8&fields=util,mem_mb,power_w",
	"fleet":        "/api/v1/fleet?t0={t0}&t1={t1}&buckets=60",
	"bubbles":      "/api/v1/bubbles?t0={t0}&t1={t1}",
	"steps":        "/api/v1/steps",
	"metrics_keys": "/api/v1/metrics/keys",
}

// compareAnswers opens the clean and the killed run in the dashboard and compares its answers: the promise
// is that the kills change nothing a user sees (no acknowledged record was lost). For each question: equal,
// or the number of JSON values that differ and the first one.
func compareAnswers(o options, clean, killed string) map[string]any {
	a, err := dashboardAnswers(o, clean, "")
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	// The same window for both: the clean run's.
	b, err := dashboardAnswers(o, killed, a["_window"].(string))
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	out := map[string]any{"window": a["_window"]}
	for k := range answerPaths {
		var diffs []string
		diffJSON(k, a[k], b[k], &diffs)
		if len(diffs) == 0 {
			out[k] = "equal"
		} else {
			out[k] = map[string]any{"differing_values": len(diffs), "first": diffs[0]}
		}
	}
	return out
}

// dashboardAnswers starts the dashboard on runDir and returns its decoded answer to each of answerPaths
// (window "t0,t1", or the run's own time range when empty) and the window under "_window".
func dashboardAnswers(o options, runDir, window string) (map[string]any, error) {
	addr := freeAddr()
	cmd := exec.Command(o.dash, "serve", "--dir", runDir, "--addr", addr, "--no-cache")
	cmd.Env = append(os.Environ(), "MILES_DASHBOARD_TOKEN=")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	get := func(path string) (any, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var v struct {
			Status string `json:"status"`
			Data   any    `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if v.Status != "success" {
			return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, v.Status)
		}
		return v.Data, nil
	}
	var meta any
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if meta, err = get("/api/v1/meta"); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dashboard on %s: %w %s", runDir, err, firstLine(&log))
	}
	if window == "" {
		tr, _ := meta.(map[string]any)["time_range"].([]any)
		if len(tr) != 2 {
			return nil, fmt.Errorf("dashboard on %s: no time_range in meta", runDir)
		}
		window = strconv.FormatFloat(tr[0].(float64), 'f', -1, 64) + "," + strconv.FormatFloat(tr[1].(float64), 'f', -1, 64)
	}
	t0, t1, _ := strings.Cut(window, ",")
	out := map[string]any{"_window": window}
	for k, p := range answerPaths {
		v, err := get(strings.NewReplacer("{t0}", t0, "{t1}", t1).Replace(p))
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// diffJSON appends a line per value of decoded JSON a and b that differs, by path.
func diffJSON(path string, a, b any, out *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: object vs %T", path, b))
			return
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffJSON(path+"."+k, x[k], y[k], out)
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: %d items vs %v", path, len(x), lenOf(b)))
			return
		}
		for i := range x {
			diffJSON(path+"["+strconv.Itoa(i)+"]", x[i], y[i], out)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			*out = append(*out, fmt.Sprintf("%s: %v vs %v", path, a, b))
		}
	}
}

func lenOf(v any) any {
	if l, ok := v.([]any); ok {
		return strconv.Itoa(len(l)) + " items"
	}
	return fmt.Sprintf("%T", v)
}

// ---- soak ----

// soak runs the simulator live at -speed for -soak wall time into the collector, with the dashboard following
// the run and one live page (a WebSocket client subscribed to the trailing 15 minutes) reading it. It samples
// the RSS of the collector and the dashboard and the dashboard's goroutines every 10 s, and reports them with
// the page's deltas and its lag behind the files at the end.
func soak(o options) map[string]any {
	runDir := filepath.Join(o.out, "soak", "run")
	p := newPorts()
	c, err := startCollector(o, runDir, p, filepath.Join(o.out, "soak-collector.log"))
	must(err)
	defer c.stop()
	simDur := time.Duration(float64(o.soakWall) * o.speed)
	simDone := make(chan error, 1)
	go func() {
		start := time.Now().UTC().Add(-simDur).Truncate(time.Second).Format(time.RFC3339)
		cmd := exec.Command(o.sim, "--fast-forward", "--mode", "async", "--nodes", strconv.Itoa(o.nodes), "--duration", simDur.String(),
			"--max-speed", strconv.FormatFloat(o.speed, 'f', -1, 64), "--seed", strconv.FormatInt(o.seed, 10),
			"--start", start, "--endpoint", p.http, "--run-dir", runDir, "--give-up", "5m", "--quiet")
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, firstLine(bytes.NewBuffer(out)))
		}
		simDone <- err
	}()
	// The dashboard needs meta.json: wait for the collector's first write.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(runDir, runfiles.DashboardDir, runfiles.MetaFile)); err == nil {
			break
		}
	}
	addr, profAddr := freeAddr(), freeAddr()
	dashArgs := []string{"serve", "--dir", runDir, "--follow", "--addr", addr, "--pprof", profAddr}
	if o.dashBudget != "" {
		dashArgs = append(dashArgs, "--memory-budget", o.dashBudget)
	}
	dash := exec.Command(o.dash, dashArgs...)
	dash.Env = append(os.Environ(), "MILES_DASHBOARD_TOKEN=")
	dlog, err := os.Create(filepath.Join(o.out, "soak-dashboard.log"))
	must(err)
	defer dlog.Close()
	dash.Stdout, dash.Stderr = dlog, dlog
	must(dash.Start())
	defer func() { _ = dash.Process.Kill(); _, _ = dash.Process.Wait() }()
	var ws *websocket.Conn
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ws, _, err = websocket.DefaultDialer.Dial("ws://"+addr+"/api/v1/live", http.Header{"Origin": []string{"http://" + addr}}); err == nil {
			break
		}
	}
	must(err)
	defer ws.Close()
	must(ws.WriteJSON(map[string]any{"type": "subscribe", "view": "compute", "lanes": "all", "follow_s": 900}))
	var deltas, msgs int64
	var lastEdge float64
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			msgs++
			var m struct {
				Type string
				Data struct {
					DataEdge float64 `json:"data_edge"`
				}
			}
			if json.Unmarshal(b, &m) == nil && m.Type == "delta" {
				deltas++
				lastEdge = max(lastEdge, m.Data.DataEdge)
			}
		}
	}()
	// The browser page (scripts/reliability/soak_page.mjs: Debian chromium on the live Compute view), when the
	// web test tooling is installed (make -C dashboard/web deps); the WebSocket client above reads regardless.
	var page *exec.Cmd
	var pageLines []map[string]any
	var pageMu sync.Mutex
	pageNote := ""
	if _, err := os.Stat("dashboard/web/node_modules/playwright-core"); err != nil {
		pageNote = "no browser page: dashboard/web/node_modules missing (make -C dashboard/web deps)"
	} else if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		pageNote = "no browser page: /usr/bin/chromium missing (scripts/install-chromium.sh)"
	} else {
		page = exec.Command("node", "scripts/reliability/soak_page.mjs", "http://"+addr+"/", "10")
		page.Stderr = dlog
		stdin, _ := page.StdinPipe()
		out, err := page.StdoutPipe()
		must(err)
		must(page.Start())
		defer func() { _ = stdin.Close(); _ = page.Process.Signal(syscall.SIGTERM); _, _ = page.Process.Wait() }()
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var m map[string]any
				if json.Unmarshal(sc.Bytes(), &m) == nil {
					pageMu.Lock()
					pageLines = append(pageLines, m)
					pageMu.Unlock()
				}
			}
		}()
	}
	type sample struct {
		T               float64 `json:"t_s"`
		Collector, Dash float64 `json:"-"`
		Threads         float64 `json:"-"`
		Goroutines      float64 `json:"-"`
		Browser         float64 `json:"-"`
		// Held is the dashboard's parsed hour blocks (MiB, by their estimates) and Evictions, Reloads its memory
		// budget's counters (docs/operations.md "Memory").
		Held, Evictions, Reloads float64 `json:"-"`
	}
	var samples []sample
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	var simErr error
loop:
	for {
		select {
		case simErr = <-simDone:
			break loop
		case <-tick.C:
			sm := sample{
				T: round(time.Since(t0).Seconds()), Collector: rssMiB(c.cmd.Process.Pid),
				Dash: rssMiB(dash.Process.Pid), Threads: threads(dash.Process.Pid),
				Goroutines: dashboardGauge(addr, "miles_dashboard_goroutines"), Browser: -1,
				Held:      round(dashboardGauge(addr, "miles_dashboard_memory_held_bytes") / (1 << 20)),
				Evictions: dashboardGauge(addr, "miles_dashboard_memory_evictions_total"),
				Reloads:   dashboardGauge(addr, "miles_dashboard_memory_reloads_total"),
			}
			if page != nil {
				sm.Browser = treeRSSMiB(page.Process.Pid)
			}
			samples = append(samples, sm)
		}
	}
	time.Sleep(3 * time.Second) // the last flush and the page's last delta
	// The dashboard's heap at the end (go tool pprof -top -sample_index=inuse_space soak-heap.pb.gz).
	if resp, err := http.Get("http://" + profAddr + "/debug/pprof/heap?gc=1"); err == nil {
		if b, err := io.ReadAll(resp.Body); err == nil {
			_ = os.WriteFile(filepath.Join(o.out, "soak-heap.pb.gz"), b, 0o644)
		}
		resp.Body.Close()
	}
	series := func(f func(sample) float64) []float64 {
		out := make([]float64, len(samples))
		for i, s := range samples {
			out[i] = f(s)
		}
		return out
	}
	// Count the files once the collector has flushed and stopped: a running one compacts closed hours under
	// the reader's feet.
	c.stop()
	st := analyze(runDir)
	pageMu.Lock()
	defer pageMu.Unlock()
	pageSeries := func(key string) []any {
		out := make([]any, len(pageLines))
		for i, l := range pageLines {
			out[i] = l[key]
		}
		return out
	}
	var pageProblems any
	if n := len(pageLines); n > 0 {
		pageProblems = map[string]any{"count": pageLines[n-1]["problems"], "last": pageLines[n-1]["last_problem"]}
	}
	return map[string]any{
		"dashboard_goroutines": series(func(s sample) float64 { return s.Goroutines }),
		"browser_rss_mib":      series(func(s sample) float64 { return s.Browser }),
		"browser_js_heap_mib":  pageSeries("js_heap_mib"), "browser_view_t1": pageSeries("view_t1"),
		"browser_dom_nodes": pageSeries("dom_nodes"), "browser_problems": pageProblems, "browser_note": pageNote,
		"wall_s_planned": o.soakWall.Seconds(), "sim_duration": simDur.String(), "speed": o.speed, "nodes": o.nodes,
		"sim_error": fmt.Sprint(simErr), "samples_every_s": 10,
		"collector_rss_mib":  series(func(s sample) float64 { return s.Collector }),
		"dashboard_rss_mib":  series(func(s sample) float64 { return s.Dash }),
		"dashboard_threads":  series(func(s sample) float64 { return s.Threads }),
		"dashboard_held_mib": series(func(s sample) float64 { return s.Held }), "dashboard_budget": o.dashBudget,
		"dashboard_evictions": series(func(s sample) float64 { return s.Evictions }),
		"dashboard_reloads":   series(func(s sample) float64 { return s.Reloads }),
		"page_messages":       msgs, "page_deltas": deltas, "page_last_edge": lastEdge,
		"gpu_util_lines": st.Streams[sc.StreamGPUUtil].Lines, "phases_lines": st.Streams[sc.StreamPhases].Lines,
		"invalid_lines": st.Streams[sc.StreamGPUUtil].Invalid + st.Streams[sc.StreamPhases].Invalid,
	}
}

// dashboardGauge reads one unlabelled gauge of the dashboard's /metrics (-1 when unreadable).
func dashboardGauge(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// treeRSSMiB sums the resident memory of pid and every descendant (the browser page: node, chromium and its
// renderer, GPU and utility processes). Shared pages count once per process: an upper bound.
func treeRSSMiB(pid int) float64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 {
				pp, _ := strconv.Atoi(f[1])
				parent[p] = pp
			}
		}
	}
	in := func(p int) bool {
		for range 64 {
			if p == pid {
				return true
			}
			pp, ok := parent[p]
			if !ok || pp <= 1 {
				return false
			}
			p = pp
		}
		return false
	}
	total := 0.0
	for p := range parent {
		if in(p) {
			total += rssMiB(p)
		}
	}
	return round(total)
}

// threads is the process's OS thread count (/proc), -1 when unreadable.
func threads(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return -1
}

// ---- dashboard exposure ----

// exposure starts the dashboard on the kill campaign's clean run (or an empty run) and records how it answers
// hostile requests. It only measures: the dashboard server's hardening belongs to its own package.
func exposure(o options) map[string]any {
	runDir := filepath.Join(o.out, "kill-clean", "run")
	if _, err := os.Stat(filepath.Join(runDir, runfiles.DashboardDir)); err != nil {
		runDir = filepath.Join(o.out, "exposure-run")
		must(os.MkdirAll(filepath.Join(runDir, runfiles.DashboardDir), 0o755))
		must(os.WriteFile(filepath.Join(runDir, runfiles.DashboardDir, runfiles.MetaFile), []byte(`{"schema_version":2,"run_name":"x","start_ts":1}`), 0o644))
	}
	r := map[string]any{}
	serve := func(addr, token string) (*exec.Cmd, *bytes.Buffer, error) {
		args := []string{"serve", "--dir", runDir, "--addr", addr, "--no-cache"}
		if token != "" {
			args = append(args, "--token", token)
		}
		cmd := exec.Command(o.dash, args...)
		cmd.Env = append(os.Environ(), "MILES_DASHBOARD_TOKEN=")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case err := <-exited:
				return nil, &out, fmt.Errorf("exited: %w", err)
			default:
			}
			if c, err := net.Dial("tcp", strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)); err == nil {
				c.Close()
				return cmd, &out, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		return nil, &out, errors.New("not listening within 60 s")
	}
	stop := func(cmd *exec.Cmd) {
		if cmd != nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	}
	// 0.0.0.0 without a token, and with a whitespace-only one.
	for name, tok := range map[string]string{"public_no_token": "", "public_blank_token": "   "} {
		cmd, out, err := serve("0.0.0.0:"+port(freeAddr()), tok)
		r[name] = map[string]any{"refused": err != nil, "output": firstLine(out)}
		stop(cmd)
	}
	// A symbolic link inside the run directory pointing out of it: never followed (no partition, no notice
	// naming its target's content).
	link := filepath.Join(runDir, runfiles.DashboardDir, sc.StreamPhases, "20200101_00.jsonl")
	_ = os.MkdirAll(filepath.Dir(link), 0o755)
	_ = os.Remove(link)
	linked := os.Symlink("/etc/passwd", link) == nil
	defer os.Remove(link)
	// Tokenless on loopback: a page rebound to 127.0.0.1 names its own host.
	{
		a := freeAddr()
		cmd, out, err := serve(a, "")
		if err != nil {
			r["tokenless_error"] = fmt.Sprintf("%v %s", err, firstLine(out))
		}
		code, _ := getOn(a, "/api/v1/meta", map[string]string{"Host": "attacker.example"})
		r["tokenless_host_attacker"] = code
		code, _ = getOn(a, "/api/v1/meta", nil)
		r["tokenless_host_loopback"] = code
		r["tokenless_websocket_rebinding_host_origin"] = wsStatus(a, "/api/v1/live", "http://attacker.example", "attacker.example")
		r["tokenless_websocket_origin_attacker"] = wsStatus(a, "/api/v1/live", "http://attacker.example", "")
		stop(cmd)
	}
	token := "reliability-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	addr := freeAddr()
	cmd, out, err := serve(addr, token)
	if err != nil {
		r["error"] = fmt.Sprintf("dashboard did not start: %v %s", err, firstLine(out))
		return r
	}
	defer stop(cmd)
	r["token_in_startup_output"] = strings.Contains(out.String(), token)
	get := func(path string, hdr map[string]string) (int, string) { return getOn(addr, path, hdr) }
	routes := []string{
		"/api/v1/meta", "/api/v1/lanes", "/api/v1/phases", "/api/v1/gpu", "/api/v1/fleet", "/api/v1/heatmap",
		"/api/v1/steps", "/api/v1/steps/1/anatomy", "/api/v1/metrics/keys", "/api/v1/metrics/series", "/api/v1/engines",
		"/api/v1/engines/series", "/api/v1/bubbles", "/api/v1/outliers", "/api/v1/advisory", "/api/v1/lifecycle/carpet",
		"/api/v1/dumps/steps", "/api/v1/dumps/steps/1", "/api/v1/dumps/steps/1/groups", "/api/v1/dumps/steps/1/samples",
		"/api/v1/dumps/steps/1/samples/0", "/api/v1/dumps/steps/1/samples/0/tokens", "/api/v1/live",
	}
	unauth := map[string]int{}
	var open []string
	for _, rt := range routes {
		for name, h := range map[string]map[string]string{
			"none": nil, "wrong": {"Authorization": "Bearer wrong"},
		} {
			code, _ := get(rt, h)
			unauth[name+"_"+strconv.Itoa(code)]++
			if code != http.StatusUnauthorized {
				open = append(open, name+" "+rt+" → "+strconv.Itoa(code))
			}
		}
	}
	r["routes_probed"], r["unauthorized_answers"], r["answered_without_token"] = len(routes), unauth, open
	forms := map[string]int{}
	for name, pair := range map[string][2]string{
		"bearer_header": {"/api/v1/meta", "Bearer " + token}, "lowercase_bearer": {"/api/v1/meta", "bearer " + token},
		"query": {"/api/v1/meta?token=" + token, ""},
	} {
		h := map[string]string{}
		if pair[1] != "" {
			h["Authorization"] = pair[1]
		}
		forms[name], _ = get(pair[0], h)
	}
	r["token_forms"] = forms
	auth := map[string]string{"Authorization": "Bearer " + token}
	code, _ := get("/api/v1/meta", map[string]string{"Authorization": "Bearer " + token, "Host": "attacker.example"})
	r["host_attacker_with_token"] = code
	trav := map[string]string{}
	for _, pth := range []string{
		"/api/v1/dumps/steps/..%2F..%2F..%2Fetc%2Fpasswd", "/api/v1/steps/..%2F..%2Fetc/anatomy",
		"/api/v1/dumps/steps/%2Fetc%2Fpasswd/samples", "/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
		"/api/v1/dumps/steps/1/samples/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
	} {
		code, body := get(pth, auth)
		leak := strings.Contains(body, "root:")
		trav[pth] = strconv.Itoa(code) + map[bool]string{true: " LEAK", false: ""}[leak]
		if strings.Contains(body, o.out) || strings.Contains(body, runDir) {
			trav[pth] += " (absolute server path in the message)"
		}
	}
	r["path_traversal"] = trav
	if linked {
		_, body := get("/api/v1/meta", auth)
		r["symlink_out_followed"] = strings.Contains(body, "20200101") || strings.Contains(body, "root:")
	}
	_, body := get("/api/v1/steps/999999/anatomy", auth)
	r["absolute_path_in_error"] = strings.Contains(body, o.out) || strings.Contains(body, runDir)
	r["websocket_origin_attacker"] = wsStatus(addr, "/api/v1/live?token="+token, "http://attacker.example", "")
	r["websocket_origin_same"] = wsStatus(addr, "/api/v1/live?token="+token, "http://"+addr, "")
	r["websocket_no_token"] = wsStatus(addr, "/api/v1/live", "http://"+addr, "")
	r["websocket_rebinding_host_origin"] = wsStatus(addr, "/api/v1/live?token="+token, "http://attacker.example", "attacker.example")
	return r
}

// getOn is a GET to addr with headers ("Host" sets the request's host).
func getOn(addr, path string, hdr map[string]string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, http.NoBody)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func firstLine(b *bytes.Buffer) string {
	if b == nil {
		return ""
	}
	s := strings.TrimSpace(b.String())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// wsStatus sends a WebSocket upgrade and returns the status line's code.
func wsStatus(addr, path, origin, host string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return -1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if host == "" {
		host = addr
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: %s\r\n\r\n", path, host, origin)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return -1
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return -1
	}
	code, _ := strconv.Atoi(f[1])
	return code
}
