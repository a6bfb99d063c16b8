package store

import (
	"bytes"
	"encoding/json"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// metricReader reads the step metrics stream: every record, and the index by key built from them
// (metrics_index.go) once the metrics views ask.
type metricReader struct {
	// run is the store whose lock and notices the reader shares.
	run *Store
	// files are the stream's hourly partitions and how far each was read.
	files *streamFiles
	// records are every metrics record read, in reading order.
	records []stepRec
	// recordsRead says records holds every partition as of the last read.
	recordsRead bool
	// index is the records folded into one series per key on its step axis.
	index metricsIndex
}

func newMetricReader(run *Store) metricReader {
	r := metricReader{run: run, files: newStreamFiles(run.dir, sc.StreamMetrics)}
	r.index.init()
	return r
}

func (r *metricReader) partitionFiles() []*streamFiles { return []*streamFiles{r.files} }

// refreshLocked tails the stream once it was read, and folds what it gained into the index once one was built.
func (r *metricReader) refreshLocked(int64) bool {
	if r.recordsRead {
		r.loadLocked()
	}
	return r.index.built && r.syncLocked()
}

// stepRec is one metrics record; topoRec one topology snapshot.
type stepRec struct {
	TS      float64            `json:"ts"`
	StepKey *string            `json:"step_key"`
	Step    *float64           `json:"step"`
	Metrics map[string]any     `json:"metrics"`
	nums    map[string]float64 // numeric metrics only
}

// parseStepRec reads one metrics record with the flat scanner (the metrics page's cold load was dominated by
// encoding/json building a map of interfaces per record); a line with escaped strings takes the slow path.
func parseStepRec(line []byte) (stepRec, bool) {
	var r stepRec
	if bytes.IndexByte(line, '\\') >= 0 {
		if json.Unmarshal(line, &r) != nil || r.TS <= 0 {
			return r, false
		}
		r.nums = map[string]float64{}
		for k, v := range r.Metrics {
			if f, ok := v.(float64); ok {
				r.nums[k] = f
			}
		}
		r.Metrics = nil
		return r, true
	}
	var metrics []byte
	ok := true
	err := scanFlat(line, func(key, val []byte, str bool) {
		switch string(key) {
		case "ts":
			r.TS, ok = parseNum(val)
		case "step_key":
			if str {
				k := string(val)
				r.StepKey = &k
			}
		case "step":
			if v, good := parseNum(val); good {
				r.Step = &v
			}
		case "metrics":
			metrics = val
		}
	})
	if err != nil || !ok || r.TS <= 0 || len(metrics) < 2 || metrics[0] != '{' {
		return r, false
	}
	r.nums = map[string]float64{}
	if scanFlat(metrics, func(key, val []byte, str bool) {
		if str {
			return
		}
		if v, good := parseNum(val); good {
			r.nums[string(key)] = v
		}
	}) != nil {
		return r, false
	}
	return r, true
}

func (r *metricReader) loadLocked() {
	for _, h := range r.files.hours() {
		p := r.files.parts[h]
		reports, err := r.files.read(p, func(line []byte) bool {
			rec, ok := parseStepRec(line)
			if !ok {
				return false
			}
			r.records = append(r.records, rec)
			return true
		})
		if err == errReload {
			// Rare (a compacted hour grew): rebuild everything from scratch.
			r.records, r.recordsRead = nil, false
			for _, p := range r.files.parts {
				*p = partition{hour: p.hour, plain: p.plain, zst: p.zst}
			}
			r.loadLocked()
			return
		}
		r.run.report(reports, err)
	}
	r.recordsRead = true
}
