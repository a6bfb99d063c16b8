package store

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The run's configuration (docs/semconv.md §11): the trainer's arguments as the emitter recorded them in the
// run_config stream, else the miles v1 snapshot in meta.json "args".

// RunConfig is the trainer's arguments of a run and where they were read.
type RunConfig struct {
	// Source is "run_config" (the emitter's record), "meta.json" (the miles v1 snapshot) or "" (none).
	Source string `json:"source"`
	// TS is when the record was made (0 for meta.json).
	TS float64 `json:"ts"`
	// Node, Service and PID name the process that recorded it (run_config only).
	Node    string `json:"node,omitempty"`
	Service string `json:"service,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// Args are the arguments by name (null when none were found).
	Args map[string]any `json:"args"`
	// Redacted are the names whose values were replaced by "[redacted]"; Truncated those cut to the bounds;
	// Dropped counts the arguments left out (docs/semconv.md §11).
	Redacted  []string `json:"redacted"`
	Truncated []string `json:"truncated"`
	Dropped   int      `json:"dropped"`
	// Records counts the run_config records of the newest hour holding one (a run that recorded its
	// arguments again, resumed, has several: the newest is shown), each once: a record written twice (the
	// same ts, node, service and pid, docs/semconv.md §8 "Record identity") counts once.
	Records int `json:"records"`
}

// runConfigRecord is one line of the run_config stream.
type runConfigRecord struct {
	TS        float64        `json:"ts"`
	Node      string         `json:"node"`
	Service   string         `json:"service"`
	PID       int            `json:"pid"`
	Args      map[string]any `json:"args"`
	Redacted  []string       `json:"redacted"`
	Truncated []string       `json:"truncated"`
	Dropped   int            `json:"dropped"`
}

// runConfigMaxLine bounds one run_config line the reader holds: the exporter's ingest limits keep a record
// under about 20 MiB only in theory (4096 arguments of 4 KiB); a real one is tens of KiB.
const runConfigMaxLine = runfiles.MaxLine

// ReadRunConfig reads the run's configuration without opening its streams: the newest run_config record by
// ts across the top-level layout and every shard (of equal ts, the one read last: top-level first, then shards
// in id order), else meta.json "args" (top-level first). Records are partitioned by the hour of their ts, so only
// the newest hour that holds a valid record is read. Unreadable lines are skipped.
func ReadRunConfig(runDir string) (*RunConfig, error) {
	layouts, err := runfiles.Layouts(runDir)
	if err != nil && len(layouts) == 0 {
		return nil, err
	}
	// Every layout's partitions of the stream, newest hour first; within an hour, layouts in order.
	type part struct {
		p     runfiles.Partition
		order int
	}
	var parts []part
	var errs []error
	for i, l := range layouts {
		ps, _, err := runfiles.ListLayoutPartitions(l.Dir, sc.StreamRunConfig)
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range ps {
			parts = append(parts, part{p, i})
		}
	}
	sort.SliceStable(parts, func(i, j int) bool {
		if !parts[i].p.Hour.Equal(parts[j].p.Hour) {
			return parts[i].p.Hour.After(parts[j].p.Hour)
		}
		return parts[i].order < parts[j].order
	})
	for i := 0; i < len(parts); {
		j := i
		var best *runConfigRecord
		type identity struct {
			ts            float64
			node, service string
			pid           int
		}
		seen := map[identity]bool{}
		for ; j < len(parts) && parts[j].p.Hour.Equal(parts[i].p.Hour); j++ {
			if _, err := parts[j].p.ReadLines(runDir, func(line []byte) error {
				if len(line) > runConfigMaxLine {
					return nil
				}
				var r runConfigRecord
				if json.Unmarshal(line, &r) != nil || r.Args == nil {
					return nil
				}
				seen[identity{r.TS, r.Node, r.Service, r.PID}] = true
				if best == nil || r.TS >= best.TS {
					best = &r
				}
				return nil
			}); err != nil {
				errs = append(errs, err)
			}
		}
		if best != nil {
			return &RunConfig{
				Source: "run_config", TS: best.TS, Node: best.Node, Service: best.Service, PID: best.PID,
				Args: best.Args, Redacted: nzStrings(best.Redacted), Truncated: nzStrings(best.Truncated),
				Dropped: best.Dropped, Records: len(seen),
			}, nil
		}
		i = j
	}
	for _, l := range layouts {
		b, err := runfiles.ReadFileMax(runDir, filepath.Join(l.Dir, runfiles.MetaFile), runfiles.MaxMetaBytes)
		if err != nil {
			continue
		}
		var m struct {
			Args map[string]any `json:"args"`
		}
		if json.Unmarshal(b, &m) == nil && m.Args != nil {
			return &RunConfig{Source: "meta.json", Args: m.Args, Redacted: []string{}, Truncated: []string{}}, errors.Join(errs...)
		}
	}
	return &RunConfig{Redacted: []string{}, Truncated: []string{}}, errors.Join(errs...)
}

func nzStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// RunConfig is the run's configuration (ReadRunConfig of the store's run directory).
func (s *Store) RunConfig() (*RunConfig, error) { return ReadRunConfig(s.dir) }
