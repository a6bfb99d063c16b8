package jsonlexporter

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The roll-up's open buckets live in memory (rollup.go); the readings in them are already in gpu_util. A
// crash (kill -9, OOM) loses the open buckets, and before restore the restarted collector wrote, for every
// lane, a record of the bucket it was cut in holding only the readings after the restart: a partial bucket
// that no record completed (docs/semconv.md §8.3 "Restarts"). restore makes the roll-up continue where the files
// end instead: it reads the tail of the newest gpu_util and gpu_rollup partitions and folds back every written
// reading whose bucket no roll-up record holds yet. The writer is idempotent across restarts: a killed and a
// clean run give the same records once merged.

// restoreTailMax bounds what restore reads back per partition; a 1024-GPU gateway writes about 7 MB of
// gpu_util per bucket width of 16 s, so the window restore needs (three buckets) is well inside it.
const restoreTailMax = 256 << 20

// restoreOlderRun is how many bytes of consecutive lines older than restore needs it reads before it stops: lines
// are appended roughly, not strictly, in time order, and an agent's backlog delivered after a gateway restart
// puts a run of old readings (and late roll-up records) between newer ones, so the first old line is no end.
// The agents send at most 32 MiB a request.
const restoreOlderRun = 64 << 20

// restoreKeep is how many buckets past the watermark restore's written readings are remembered: a request
// delivered again after a restart comes within seconds, well inside it.
const restoreKeep = 8

// restoredReading is the part of a gpu_util line the roll-up folds.
type restoredReading struct {
	TS    float64  `json:"ts"`
	Node  *string  `json:"node"`
	GPU   *int64   `json:"gpu"`
	Util  *float64 `json:"util"`
	Mem   *float64 `json:"mem_mb"`
	Power *float64 `json:"power_w"`
}

// restore folds back into u the readings of root's gpu_util tail that no gpu_rollup record holds, and marks
// the buckets the roll-up already wrote as emitted; the records of buckets it closes go to r. It returns the
// readings folded back.
func (u *rollup) restore(root string, r *records) (int, error) {
	raw, _, err := runfiles.ListLayoutPartitions(root, sc.StreamGPUUtil)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	// The newest written reading is the watermark; open buckets start less than two buckets before it.
	var readings []gpuReading
	watermark := int64(math.MinInt64)
	cutoff := int64(math.MaxInt64)
	var errs []error
	for _, p := range slices.Backward(raw) {
		if p.Plain == "" || (watermark != math.MinInt64 && p.Hour.Unix()+3600 <= cutoff) {
			break // a compressed hour is closed for longer than any bucket stays open
		}
		err := tailLines(p.Plain, func(line []byte) (older bool) {
			var rd restoredReading
			if json.Unmarshal(line, &rd) != nil || rd.Node == nil || rd.GPU == nil || !(rd.TS > 0) || rd.TS > 1<<33 {
				return false
			}
			s := int64(rd.TS)
			if watermark == math.MinInt64 || s > watermark {
				watermark = s
				cutoff = u.bucketOf(pcomSec(s)) - 2*u.step
			}
			if s < cutoff {
				return true
			}
			g := gpuReading{node: *rd.Node, gpu: *rd.GPU, ts: pcommon.Timestamp(uint64(math.Round(rd.TS * 1e9)))}
			for i, v := range []*float64{rd.Util, rd.Mem, rd.Power} {
				if v != nil {
					g.has |= 1 << i
					g.vals[i] = *v
				}
			}
			readings = append(readings, g)
			return false
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if watermark == math.MinInt64 {
		return 0, errors.Join(errs...)
	}
	// What the roll-up wrote already, per lane: its newest bucket.
	emitted := map[laneKey]int64{}
	rolls, _, err := runfiles.ListLayoutPartitions(root, sc.StreamGPURollup)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range slices.Backward(rolls) {
		if p.Plain == "" || p.Hour.Unix()+3600 <= cutoff-2*u.step {
			break
		}
		err := tailLines(p.Plain, func(line []byte) bool {
			var rec struct {
				TS   int64   `json:"ts"`
				Node *string `json:"node"`
				GPU  *int64  `json:"gpu"`
			}
			if json.Unmarshal(line, &rec) != nil || rec.Node == nil || rec.GPU == nil {
				return false
			}
			if rec.TS < cutoff-2*u.step {
				return true
			}
			k := laneKey{*rec.Node, *rec.GPU}
			if t, ok := emitted[k]; !ok || rec.TS > t {
				emitted[k] = rec.TS
			}
			return false
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	u.mu.Lock()
	for k, t := range emitted {
		u.lanes[k] = &rollLane{emitted: t}
	}
	u.watermark = max(u.watermark, watermark)
	u.mu.Unlock()
	kept := readings[:0]
	u.mu.Lock()
	for _, g := range readings {
		if unixSec(g.ts) < cutoff {
			continue // read before a newer line moved the cutoff
		}
		if t, ok := emitted[laneKey{g.node, g.gpu}]; ok && u.bucketOf(g.ts) <= t {
			l := u.lanes[laneKey{g.node, g.gpu}] // in a record already: remembered, should it be delivered again
			l.written = append(l.written, seenReading{g.ts, g.has})
			continue
		}
		kept = append(kept, g)
	}
	u.mu.Unlock()
	// tailLines read backwards; fold in time order so buckets close as they did.
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].ts < kept[j].ts })
	u.fold(kept, r)
	return len(kept), errors.Join(errs...)
}

// tailLines calls fn with the complete lines of the file at path from the last one backwards, until fn has said
// of restoreOlderRun bytes of consecutive lines that they are older than it needs, the file's start, or
// restoreTailMax bytes.
func tailLines(path string, fn func(line []byte) (older bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	lo := max(end-restoreTailMax, 0)
	const step = 1 << 20
	var carry []byte // the start of a line cut by the previous (later) block
	olderRun := 0    // bytes of consecutive lines fn called older
	for end > lo {
		start := max(end-step, lo)
		buf := make([]byte, end-start, end-start+int64(len(carry)))
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		buf = append(buf, carry...)
		if carry == nil && end == fi.Size() {
			// The file's own tail after its last newline is a torn or in-progress line: not a record.
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				buf = buf[:i+1]
			} else {
				buf = buf[:0]
			}
		}
		// Lines wholly inside buf: after its first newline, unless buf starts the file.
		first := 0
		if start > 0 {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				carry, end = buf, start
				continue
			}
			first = i + 1
		}
		body := buf[first:]
		for len(body) > 0 {
			body = bytes.TrimRight(body, "\r\n")
			i := bytes.LastIndexByte(body, '\n')
			line := body[i+1:]
			body = body[:i+1]
			if len(line) > 0 {
				if !fn(line) {
					olderRun = 0
				} else if olderRun += len(line) + 1; olderRun > restoreOlderRun {
					return nil
				}
			}
			if i < 0 {
				break
			}
		}
		carry = append([]byte(nil), buf[:first]...)
		end = start
	}
	return nil
}
