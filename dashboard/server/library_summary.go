package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// A run's summary for the runs page, made without parsing its streams: meta.json, the lane catalog, the
// directory listing of each stream and the tail of its newest partition (docs/dashboard-api.md "Run library").

// RunSummary is one run of GET /api/v1/runs.
type RunSummary struct {
	// ID names the run in every URL (?run=): its path under the library root.
	ID string `json:"id"`
	// Name is meta.json's run_name, else the directory's name.
	Name string `json:"name"`
	// Layout is "otelcol-miles", "miles-v1" or "dumps" (miles dumps only).
	Layout string `json:"layout"`
	// Shards is how many gateway shards wrote the run (0: one unsharded layout).
	Shards int `json:"shards"`
	// StartTS is the run's oldest record time (else meta.json's start_ts); 0 when unknown.
	StartTS float64 `json:"start_ts"`
	// LastTS is the newest record time in the tails read; 0 when unknown.
	LastTS float64 `json:"last_ts"`
	// DurationS is LastTS − StartTS.
	DurationS float64 `json:"duration_s"`
	// LastWrite is when a file of the run last changed (Unix seconds).
	LastWrite float64 `json:"last_write"`
	// Live says a file of the run changed within the library's live window.
	Live bool `json:"live"`
	// Nodes and GPUs count the lane catalog's nodes and lanes (0: no catalog, or too big to read here).
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
	// Mode is "colocate" (a lane both trains and rolls out), "async" (disjoint), or "" (no roles known).
	Mode string `json:"mode"`
	// StepKey and LatestStep are the newest logged step (null: no metrics).
	StepKey    string `json:"step_key"`
	LatestStep *int64 `json:"latest_step"`
	// Headline are the newest values of the headline metrics the run logs, by key.
	Headline map[string]float64 `json:"headline"`
	// Args are the miles v1 snapshot of the trainer's arguments (meta.json "args"), else null.
	Args map[string]any `json:"args"`
	// Config says whether and where the run records its trainer arguments (GET /api/v1/run_config has them).
	Config RunConfigBrief `json:"config"`
	// Advisory is the advisory state of a run that is open (its streams loaded), else null.
	Advisory *RunAdvisoryState `json:"advisory"`
}

// RunConfigBrief is a run's configuration in short: its source ("run_config", "meta.json" or ""), when it was
// recorded and how many arguments it has.
type RunConfigBrief struct {
	Source string  `json:"source"`
	TS     float64 `json:"ts"`
	N      int     `json:"n"`
}

// RunAdvisoryState is the advisory of an open run, in short.
type RunAdvisoryState struct {
	// Firing are the advisories shown, most severe first.
	Firing []RunAdvisoryFiring `json:"firing"`
	// Level is the most severe level firing, "" when none.
	Level string `json:"level"`
	// Thresholds are the thresholds this server judged the run with that differ from the defaults (the
	// advisory's own, docs/dashboard-api.md "GET /api/v1/advisory"); absent when all are the defaults.
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
}

// RunAdvisoryFiring is one advisory shown.
type RunAdvisoryFiring struct {
	ID    string `json:"id"`
	Rule  string `json:"rule"`
	Level string `json:"level"`
}

// HeadlineKeys are the step metrics the runs page shows, when logged.
var HeadlineKeys = []string{
	"rollout/raw_reward", "perf/step_time", "perf/wait_time_ratio", "train/loss", "train/entropy", "perf/mfu",
}

// streamNames are the streams whose tails date a run.
var streamNames = []string{"gpu_util", "phases", "metrics", "trajectories", "engine_series", "topology"}

// layoutRoots are the directories holding a complete single-gateway layout: the run itself and each shard
// (docs/semconv.md §8).
func layoutRoots(dir string) (roots []string, shards int) {
	if fileExists(filepath.Join(dir, runfiles.DashboardDir, runfiles.MetaFile)) || dirExists(filepath.Join(dir, runfiles.DashboardDir)) {
		roots = append(roots, dir)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, runfiles.DashboardDir, "shards"))
	for _, e := range ents {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			roots = append(roots, filepath.Join(dir, runfiles.DashboardDir, "shards", e.Name()))
			shards++
		}
	}
	return roots, shards
}

// dashDir is the folder of a layout's files: a shard directory holds meta.json and the streams itself.
func dashDir(root string) string {
	if filepath.Base(filepath.Dir(root)) == "shards" {
		return root
	}
	return filepath.Join(root, runfiles.DashboardDir)
}

// summaryStamp identifies the files a summary is made from: meta.json, the lane catalog, and each stream's
// newest partition (name, size, time). It costs a directory listing per stream.
func summaryStamp(dir string) string {
	var b strings.Builder
	roots, _ := layoutRoots(dir)
	st := func(p string) {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", filepath.Base(p), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	for _, root := range roots {
		d := dashDir(root)
		st(filepath.Join(d, runfiles.MetaFile))
		st(filepath.Join(d, runfiles.LaneCatalogFile))
		if p := newestFile(filepath.Join(d, sc.StreamRunConfig)); p != "" {
			st(p)
		}
		for _, s := range streamNames {
			if p := newestFile(filepath.Join(d, s)); p != "" {
				st(p)
			}
		}
	}
	st(filepath.Join(dir, "rollout_data"))
	return b.String()
}

// newestFile is the newest partition file of a stream directory, by hour, the plain form of an hour before
// its compressed one (it is the newer); "" when none.
func newestFile(streamDir string) string {
	ents, err := os.ReadDir(streamDir)
	if err != nil {
		return ""
	}
	best, bestBase, bestPlain := "", "", false
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			continue
		}
		base, plain := strings.CutSuffix(n, runfiles.PlainExt)
		if !plain {
			var ok bool
			if base, ok = strings.CutSuffix(n, runfiles.CompressedExt); !ok {
				continue
			}
		}
		if _, err := runfiles.ParseHourName(base); err != nil {
			continue
		}
		if base > bestBase || (base == bestBase && plain && !bestPlain) {
			best, bestBase, bestPlain = n, base, plain
		}
	}
	if best == "" {
		return ""
	}
	return filepath.Join(streamDir, best)
}

// tailBytes is how much of a plain partition's end a summary reads.
const tailBytes = 256 << 10

// readTail is the last complete lines of a plain file (up to tailBytes), or of a small compressed one.
func readTail(run, path string) []byte {
	if strings.HasSuffix(path, runfiles.CompressedExt) {
		fi, err := os.Stat(path)
		if err != nil || fi.Size() > 4<<20 {
			return nil
		}
		var buf bytes.Buffer
		_, _ = runfiles.Partition{Compressed: path}.ReadLines(run, func(line []byte) error {
			buf.Write(line)
			buf.WriteByte('\n')
			if buf.Len() > 2*tailBytes {
				rest := buf.Bytes()[buf.Len()-tailBytes:]
				buf.Reset()
				buf.Write(rest)
			}
			return nil
		})
		return buf.Bytes()
	}
	f, err := runfiles.Open(run, path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(0, fi.Size()-tailBytes)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return nil
	}
	if off > 0 { // the first line is cut
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 { // a line being written
		b = b[:i+1]
	}
	return b
}

// summarize makes a run's summary (see the file comment for what it reads).
func summarize(id, dir string) RunSummary {
	s := RunSummary{ID: id, Name: filepath.Base(dir), Layout: "dumps", Headline: map[string]float64{}}
	roots, shards := layoutRoots(dir)
	s.Shards = shards
	nodes := map[string]bool{}
	var train, roll, both bool
	first, dataFirst := math.Inf(1), math.Inf(1) // meta.json's start_ts, the oldest record
	for _, root := range roots {
		d := dashDir(root)
		var meta struct {
			RunName string         `json:"run_name"`
			Writer  string         `json:"writer"`
			StartTS float64        `json:"start_ts"`
			Args    map[string]any `json:"args"`
		}
		if b := readSmall(dir, filepath.Join(d, runfiles.MetaFile), 1<<20); b != nil && json.Unmarshal(b, &meta) == nil {
			if meta.RunName != "" && s.Name == filepath.Base(dir) {
				s.Name = meta.RunName
			}
			if meta.StartTS > 0 {
				first = math.Min(first, meta.StartTS)
			}
			if meta.Args != nil && s.Args == nil {
				s.Args = meta.Args
			}
			if meta.Writer == "otelcol-miles" {
				s.Layout = "otelcol-miles"
			} else if s.Layout == "dumps" {
				s.Layout = "miles-v1"
			}
		} else if s.Layout == "dumps" && dirExists(d) {
			s.Layout = "miles-v1"
		}
		var cat struct {
			Lanes map[string]struct {
				Roles []string `json:"roles"`
			} `json:"lanes"`
		}
		if b := readSmall(dir, filepath.Join(d, runfiles.LaneCatalogFile), 8<<20); b != nil && json.Unmarshal(b, &cat) == nil {
			for key, l := range cat.Lanes {
				s.GPUs++
				if i := strings.LastIndexByte(key, ':'); i > 0 {
					nodes[key[:i]] = true
				}
				t, r := false, false
				for _, role := range l.Roles {
					t = t || role == "train"
					r = r || role == "rollout"
				}
				train, roll, both = train || t, roll || r, both || (t && r)
			}
		}
		for _, name := range streamNames {
			sd := filepath.Join(d, name)
			p := newestFile(sd)
			if p == "" {
				continue
			}
			if fi, err := os.Stat(p); err == nil {
				s.LastWrite = math.Max(s.LastWrite, float64(fi.ModTime().UnixNano())/1e9)
			}
			if f, ok := firstRecord(dir, sd); ok {
				dataFirst = math.Min(dataFirst, f)
			}
			tail := readTail(dir, p)
			// A compacted hour's span frame says where it ends (its last lines may be one node's: gpu_util is
			// compacted node by node, docs/semconv.md §8.3).
			last, ok := 0.0, false
			if strings.HasSuffix(p, runfiles.CompressedExt) {
				_, last, ok = runfiles.ReadSpan(dir, p)
			}
			if !ok {
				_, last, ok = runfiles.SpanOfLines(tail)
			}
			if ok {
				s.LastTS = math.Max(s.LastTS, last)
			}
			if name == "metrics" {
				s.latestMetrics(tail)
			}
		}
	}
	if rc, _ := store.ReadRunConfig(dir); rc != nil {
		s.Config = RunConfigBrief{Source: rc.Source, TS: rc.TS, N: len(rc.Args)}
	}
	if fi, err := os.Stat(filepath.Join(dir, "rollout_data")); err == nil {
		s.LastWrite = math.Max(s.LastWrite, float64(fi.ModTime().UnixNano())/1e9)
	}
	s.Nodes = len(nodes)
	switch {
	case both:
		s.Mode = "colocate"
	case train && roll:
		s.Mode = "async"
	}
	// The oldest record dates the run (a fast-forwarded or backfilled run is written after its time);
	// meta.json's start (the collector's first start) when no stream has a record yet.
	switch {
	case !math.IsInf(dataFirst, 1):
		s.StartTS = dataFirst
	case !math.IsInf(first, 1):
		s.StartTS = first
	}
	if s.LastTS > 0 && s.StartTS > 0 {
		s.DurationS = math.Max(0, s.LastTS-s.StartTS)
	}
	return s
}

// firstRecord is the oldest record time of a stream: the first lines of its oldest plain partition, or the
// span frame of its oldest compressed one.
func firstRecord(run, streamDir string) (float64, bool) {
	ents, err := os.ReadDir(streamDir)
	if err != nil {
		return 0, false
	}
	oldest, oldestBase := "", ""
	for _, e := range ents {
		n := e.Name()
		base, plain := strings.CutSuffix(n, runfiles.PlainExt)
		if !plain {
			var ok bool
			if base, ok = strings.CutSuffix(n, runfiles.CompressedExt); !ok {
				continue
			}
		}
		if _, err := runfiles.ParseHourName(base); err != nil || e.IsDir() {
			continue
		}
		// The compressed form of an hour holds its older records.
		if oldest == "" || base < oldestBase || (base == oldestBase && !plain) {
			oldest, oldestBase = n, base
		}
	}
	if oldest == "" {
		return 0, false
	}
	p := filepath.Join(streamDir, oldest)
	if strings.HasSuffix(p, runfiles.CompressedExt) {
		first, _, ok := runfiles.ReadSpan(run, p)
		return first, ok && first > minUnixTime
	}
	f, err := runfiles.Open(run, p)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	}
	first, _, ok := runfiles.SpanOfLines(head)
	// Times inside a record may be relative (a trajectory bundle's spans count from its "t"): a stream whose
	// oldest time is not a plausible Unix time does not date the run.
	return first, ok && first > minUnixTime
}

// minUnixTime is 2001-09-09: anything older is a relative time, not a record's date.
const minUnixTime = 1e9

func readSmall(run, path string, limit int64) []byte {
	b, err := runfiles.ReadFileMax(run, path, limit)
	if err != nil {
		return nil
	}
	return b
}

// latestMetrics takes the newest step and the headline values from the tail of the newest metrics partition:
// the step of the newest record of the rollout step key when logged (else of any key), and each headline
// key's newest value.
func (s *RunSummary) latestMetrics(tail []byte) {
	type rec struct {
		StepKey string         `json:"step_key"`
		Step    *int64         `json:"step"`
		Metrics map[string]any `json:"metrics"`
	}
	for line := range bytes.SplitSeq(tail, []byte{'\n'}) {
		var r rec
		if len(line) == 0 || json.Unmarshal(line, &r) != nil || r.Step == nil {
			continue
		}
		if s.LatestStep == nil || r.StepKey == s.StepKey || (s.StepKey != "rollout/step" && r.StepKey == "rollout/step") {
			if s.LatestStep == nil || r.StepKey != s.StepKey || *r.Step >= *s.LatestStep {
				step := *r.Step
				s.StepKey, s.LatestStep = r.StepKey, &step
			}
		}
		for _, k := range HeadlineKeys {
			if v, ok := r.Metrics[k].(float64); ok {
				s.Headline[k] = v
			}
		}
	}
}
