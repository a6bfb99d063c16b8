package store

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// A first all-lane view of a run without a roll-up (miles v1) parses its gpu_util hours for the eager field
// alone (gpuBlock.deferred). A lane view asked next wants the other fields of a few lanes: rather than parse the
// hour again, whole, the deferred read notes where each node's runs of lines start in the hour's plain file (a
// node's GPUs are read and written together, so a run holds its lanes' readings of one moment), and the lane
// view reads those runs alone, a few hundredths of the hour, into whole lanes (laneData.whole) that replace the
// deferred ones.
//
//	deferred read (ReadOffsets) ──▶ runs: node → offsets ──▶ lane view of other fields: readLanes ──▶ whole lanes

// keepRuns says whether a read of hour h into a new block b, of every lane and the eager fields alone, notes the
// runs: the hour is one plain file read from its start.
func keepRuns(h int64, b *gpuBlock, p *partition.Partition) bool {
	one := p.Single()
	return h >= 0 && b.deferred && b.only == nil && one != nil && one.Zst == "" && one.Plain != "" && one.PlainOff == 0
}

// addLineAt is addLine noting the line's offset for the runs.
func (b *gpuBlock) addLineAt(line []byte, off int64) bool {
	b.lineOff = off
	b.lines++
	return b.addLine(line)
}

// settleRuns drops the runs when they do not pay: lines not grouped by node (a run per line or so), or a file
// past what a run's offset holds.
func (b *gpuBlock) settleRuns(p *partition.Partition) {
	if !b.runs {
		return
	}
	n := 0
	for _, nl := range b.byNode {
		n += len(nl.runs)
	}
	if one := p.Single(); one == nil || one.PlainOff > math.MaxUint32 || 4*n > b.lines {
		b.dropRuns()
	}
}

// dropRuns forgets the runs of lines and notes no more.
func (b *gpuBlock) dropRuns() {
	b.runs = false
	for _, nl := range b.byNode {
		nl.runs = nil
	}
}

// runLanes is the lanes of only (nil when it is nil) whose other fields deferred block b can read from its runs,
// and false when it cannot serve every one of them that it holds.
func (b *gpuBlock) runLanes(only *laneFilter) (*laneFilter, bool) {
	if only == nil || !b.runs || !b.deferred || b.only != nil {
		return nil, false
	}
	want := newLaneFilter()
	for _, k := range only.keys {
		nl := b.byNode[k.node]
		if l := nl.lane(k.gpu); l == nil || l.whole {
			continue // not in the hour, or whole already
		}
		if nl.runs == nil {
			return nil, false
		}
		want.add(k.node, k.gpu)
	}
	return want, true
}

// wholeFor says whether every lane of want the deferred block b holds is whole.
func (b *gpuBlock) wholeFor(want *laneFilter) bool {
	want, ok := b.runLanes(want)
	return ok && len(want.keys) == 0
}

// readLanes reads every field of the lanes of only that deferred block b lacks from the runs of their nodes in
// the hour's plain file, up to where b was read, and makes them whole in b. false when the runs do not serve (a
// file replaced, a lane read with another count of readings): the caller then reads the hour.
func (g *gpuReader) readLanes(b *gpuBlock, p *partition.Partition, only *laneFilter) bool {
	want, ok := b.runLanes(only)
	one := p.Single()
	if !ok || one == nil || one.Zst != "" || one.Plain == "" {
		return false
	}
	if len(want.keys) == 0 {
		return true
	}
	f, err := runfiles.Open(g.dir, one.Plain)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || one.PlainInfo != nil && !os.SameFile(fi, one.PlainInfo) {
		return false
	}
	side := newGPUBlock(b.hour)
	side.only = want
	buf := make([]byte, 4<<10)
	for node := range want.nodes {
		for _, off := range b.byNode[node].runs {
			if buf, err = readRun(f, int64(off), one.PlainOff, []byte(node), buf, side.addLine); err != nil {
				return false
			}
		}
	}
	side.sortScrambled()
	if b.sealed > 0 {
		side.seal()
	}
	for _, k := range want.keys {
		nl, old := side.lanes[k.node+":"+itoa(k.gpu)], b.byNode[k.node].lanes[k.gpu]
		if nl == nil || nl.ts.Len() != old.ts.Len() {
			return false
		}
	}
	sealed := b.sealed == b.values
	for _, k := range want.keys {
		key := k.node + ":" + itoa(k.gpu)
		nl := side.lanes[key]
		nl.whole = true
		b.values -= laneValues(b.byNode[k.node].lanes[k.gpu])
		b.byNode[k.node].lanes[k.gpu] = nl
		b.lanes[key] = nl
		b.wholeLanes++
	}
	b.values += side.values
	if sealed {
		b.sealed = b.values
	}
	b.lastLanes = nil // laneFor finds the lanes again
	if b.wholeLanes == len(b.lanes) {
		b.deferred = false // every lane whole: the block holds the hour's every field
		b.dropRuns()
	}
	return true
}

func (b *gpuBlock) heldValues() int { return b.values }

// laneValues counts the values the lane holds (the gaps between a field's readings are NaN).
func laneValues(l *laneData) int {
	n := 0
	for _, f := range l.fields {
		f.vals.Each(func(_ int, v float64) bool {
			if v == v {
				n++
			}
			return true
		})
	}
	return n
}

// readRun hands sink the lines of node's run starting at off (up to limit): until a line of another node. buf
// is the read buffer, returned grown when a line did not fit.
func readRun(f *os.File, off, limit int64, node, buf []byte, sink func([]byte) bool) ([]byte, error) {
	for off < limit {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), limit-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		data, used := buf[:n], 0
		for {
			i := bytes.IndexByte(data[used:], '\n')
			if i < 0 {
				break
			}
			line := data[used : used+i]
			used += i + 1
			if nd, _, ok := lineLane(line); ok && !bytes.Equal(nd, node) {
				return buf, nil
			}
			sink(line)
		}
		if used == 0 {
			if int64(n) < min(int64(len(buf)), limit-off) {
				return buf, nil // a partial last line
			}
			buf = make([]byte, 2*len(buf)) // a line longer than the buffer
			continue
		}
		off += int64(used)
	}
	return buf, nil
}
