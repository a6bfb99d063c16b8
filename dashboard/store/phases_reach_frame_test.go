package store

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// reachHours writes random phases hours in the collector's layout, filed as it files them (markers by start
// hour, closed records by end hour), with what real runs hold: ranks seeded alike (equal span ids), processes
// without a pid, phases across hours, markers never closed, records written twice (a replayed batch, sometimes
// in another hour's file or shard), closed records whose end is before their start or whose start differs from
// their marker's, and now and then a line not in the collector's layout (upper-case id, a space, an escape).
func reachHours(seed uint64) map[int64][]byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	files := map[int64]*bytes.Buffer{}
	put := func(ts float64, line string) {
		h := int64(ts / 3600)
		if files[h] == nil {
			files[h] = &bytes.Buffer{}
		}
		files[h].WriteString(line)
	}
	type lane struct {
		node      string
		rank, pid int
		ids       *rand.Rand
	}
	var lanes []lane
	for n := range 3 {
		for r := range 3 {
			pid := 1000 + 10*n + r
			if n == 2 && r == 0 {
				pid = 0 // written without one
			}
			lanes = append(lanes, lane{fmt.Sprintf("node-%d", n), 3*n + r, pid, rand.New(rand.NewPCG(uint64(r), 1))})
		}
	}
	names := []string{"actor_train", "update_weights", "sleep", "wake_up", "log_probs"}
	line := func(l lane, name string, t0 float64, t1 string, span uint64, odd int) string {
		pid := ""
		if l.pid > 0 {
			pid = fmt.Sprintf(`,"pid":%d`, l.pid)
		}
		extra := ""
		if rng.IntN(3) == 0 {
			extra = `,"uuids":["GPU-` + l.node + `"]`
		}
		if rng.IntN(2) == 0 {
			extra += `,"step":7`
		}
		s := fmt.Sprintf(`{"name":%q,"t0":%.6f,"t1":%s,"node":%q,"rank":%d,"role":"train","gpus":[%d]%s,"span":"%016x"%s}`,
			name, t0, t1, l.node, l.rank, l.rank%8, extra, span, pid)
		switch odd {
		case 1:
			s = strings.Replace(s, fmt.Sprintf("%016x", span), fmt.Sprintf("%016X", span), 1)
		case 2:
			s = strings.Replace(s, `"role":"train"`, `"role": "train"`, 1)
		case 3:
			s = strings.Replace(s, `"name":"`, `"name":"q\"`, 1)
		}
		return s + "\n"
	}
	for _, l := range lanes {
		for t := h0 + 5 + rng.Float64()*60; t < h0+6*3600; {
			d := 10 + rng.Float64()*400
			if rng.IntN(30) == 0 {
				d = 2000 + rng.Float64()*6000
			}
			name, span := names[rng.IntN(len(names))], l.ids.Uint64()
			odd := 0
			if rng.IntN(400) == 0 {
				odd = 1 + rng.IntN(3)
			}
			t0m, t0c, t1 := t, t, t+d
			switch rng.IntN(60) {
			case 0:
				t1 = t - 5 // ends before it starts
			case 1:
				t0m = t + 1 // the marker's start is not the record's
			}
			marker := line(l, name, t0m, "null", span, odd)
			put(t0m, marker)
			if rng.IntN(25) == 0 {
				put(t0m+rng.Float64()*600, marker) // replayed: later in the file, or in the next hour's
			}
			if rng.IntN(40) != 0 { // else never closed
				rec := line(l, name, t0c, fmt.Sprintf("%.6f", t1), span, odd)
				put(t1, rec)
				if rng.IntN(25) == 0 {
					put(t1+rng.Float64()*600, rec)
				}
			}
			t += d + rng.Float64()*20
		}
	}
	out := map[int64][]byte{}
	for h, b := range files {
		out[h] = b.Bytes()
	}
	return out
}

// writeReachRun writes hours as compacted phases partitions (with a reach when withReach and the collector would
// write one) into dir, split over shards by a hash of the line when shards > 1, the second shard's hours cut in
// two: a compacted start and a plain rest beside it (late records).
func writeReachRun(t *testing.T, dir string, hours map[int64][]byte, shards int, withReach bool) (reaches int) {
	t.Helper()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{}}`)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	for h, text := range hours {
		name := runfiles.HourName(time.Unix(h*3600, 0).UTC())
		parts := make([][]byte, shards)
		for l := range bytes.Lines(text) {
			f := fnv.New32a()
			f.Write(l)
			i := int(f.Sum32()) % shards
			parts[i] = append(parts[i], l...)
		}
		for i, b := range parts {
			if len(b) == 0 {
				continue
			}
			folder := filepath.Join(dir, runfiles.DashboardDir, "phases")
			if shards > 1 {
				folder = filepath.Join(runfiles.ShardDir(dir, fmt.Sprint("s", i)), "phases")
			}
			var plain []byte
			if i == 1 {
				cut := bytes.IndexByte(b[len(b)*2/3:], '\n') + len(b)*2/3 + 1
				b, plain = b[:cut], b[cut:]
			}
			z := enc.EncodeAll(b, nil)
			if withReach {
				if r, ok, err := runfiles.PhaseReachOf(bytes.NewReader(b), int64(len(b)), float64(h*3600)); err != nil {
					t.Fatal(err)
				} else if ok {
					z = runfiles.AppendPhaseReach(z, enc, int64(len(z)), r)
					reaches++
				}
			}
			if first, last, ok := runfiles.SpanOfLines(b); ok {
				z = runfiles.AppendSpan(z, first, last)
			}
			write(t, folder, name+runfiles.CompressedExt, string(z))
			if len(plain) > 0 {
				write(t, folder, name+runfiles.PlainExt, string(plain))
			}
		}
	}
	return reaches
}

// sparseBlocks reads every phases hour of the run in dir sparse, as a window outside it does.
func sparseBlocks(t *testing.T, dir string) map[int64]*phaseBlock {
	t.Helper()
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]*phaseBlock{}
	for _, h := range st.phases.files.Hours() {
		b, l := st.phases.readHour(h, nil, st.phases.files.Parts[h].Unstarted(), hourRead{reach: true})
		if l.err != nil || !b.sparse {
			t.Fatalf("hour %d: sparse %v, %v", h, b.sparse, l.err)
		}
		out[h] = b
	}
	return out
}

// blockFacts is what a sparse block answers with, node names resolved (the blocks' node dictionaries are filled
// in read order).
type blockFacts struct {
	Closed, Open []string
	Spans        []string
	IDs          []string
	MaxT         float64
}

func factsOfBlock(b *phaseBlock) blockFacts {
	rec := func(r *phaseRec) string {
		t1 := "open"
		if r.T1 != nil {
			t1 = fmt.Sprint(*r.T1)
		}
		return fmt.Sprintf("%s %v %s %s/%d/%d %s %v %d", r.Name, r.T0, t1, b.nodes[r.nodeID], r.Rank, r.PID, r.Span, r.GPUs, r.step)
	}
	var f blockFacts
	for i := range b.closed {
		f.Closed = append(f.Closed, rec(&b.closed[i]))
	}
	for i := range b.open {
		f.Open = append(f.Open, rec(&b.open[i]))
	}
	for k := range b.spans {
		f.Spans = append(f.Spans, fmt.Sprintf("%s/%d/%d/%016x", k.node, k.rank, k.pid, k.span))
	}
	for k := range b.ids {
		f.IDs = append(f.IDs, k)
	}
	slices.Sort(f.Spans)
	slices.Sort(f.IDs)
	f.MaxT = b.maxT
	return f
}

// TestPhaseReachAgrees: a sparse read of a compacted phases hour through its reach (runfiles.PhaseReach) gives
// the block a sparse read of its every line gives — records in the same order, the same closed identities, the
// same newest time — in one layout and over shards with late plain records beside, for hours with and without a
// reach; and a window's phases are the same over a run written with reaches and one without.
func TestPhaseReachAgrees(t *testing.T) {
	for seed := range uint64(6) {
		hours := reachHours(seed)
		for _, shards := range []int{1, 3} {
			with, without := t.TempDir(), t.TempDir()
			reaches := writeReachRun(t, with, hours, shards, true)
			writeReachRun(t, without, hours, shards, false)
			if reaches == 0 {
				t.Fatalf("seed %d: no hour has a reach: the test does not test it", seed)
			}
			got, want := sparseBlocks(t, with), sparseBlocks(t, without)
			for h, w := range want {
				if g, wf := factsOfBlock(got[h]), factsOfBlock(w); !reflect.DeepEqual(g, wf) {
					t.Fatalf("seed %d, %d shards, hour %+d: read through the reach\n%+v\nwant\n%+v", seed, shards, h-int64(h0/3600), g, wf)
				}
			}
		}
	}
}

// TestPhaseReachRead: the sparse read takes a hour's reach instead of its data (a reach with its data frame
// destroyed still reads), and ignores one that no longer stands for the hour (late records compacted after it)
// or is damaged.
func TestPhaseReachRead(t *testing.T) {
	hours := reachHours(11)
	dir, ref := t.TempDir(), t.TempDir()
	if writeReachRun(t, dir, hours, 1, true) == 0 {
		t.Fatal("no reach written")
	}
	writeReachRun(t, ref, hours, 1, false)
	want := sparseBlocks(t, ref)
	folder := filepath.Join(dir, runfiles.DashboardDir, "phases")
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	var hs []int64
	for h := range hours {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	edit := func(h int64, fn func(z []byte) []byte) {
		p := filepath.Join(folder, runfiles.HourName(time.Unix(h*3600, 0).UTC())+runfiles.CompressedExt)
		z, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeBytes(t, p, fn(z))
	}
	hasReach := func(h int64) bool {
		p := filepath.Join(folder, runfiles.HourName(time.Unix(h*3600, 0).UTC())+runfiles.CompressedExt)
		z, _ := os.ReadFile(p)
		_, err := runfiles.ReadPhaseReach(bytes.NewReader(z), int64(len(z)))
		return err == nil
	}
	var withReach []int64
	for _, h := range hs {
		if hasReach(h) {
			withReach = append(withReach, h)
		}
	}
	if len(withReach) < 3 {
		t.Fatalf("%d hours with a reach, want 3", len(withReach))
	}
	// 1. The data frame made undecodable: the reach alone answers, as the whole hour did.
	garbled := withReach[0]
	edit(garbled, func(z []byte) []byte {
		for i := 4; i < 200; i++ {
			z[i] ^= 0x5a
		}
		return z
	})
	// 2. Late records appended after the reach (a new frame and a new span frame): the reach is not the hour's.
	late := withReach[1]
	extra := []byte(`{"name":"late","t0":` + fmt.Sprintf("%.6f", float64(late*3600)-50) + `,"t1":` +
		fmt.Sprintf("%.6f", float64(late*3600)+10) + `,"node":"node-9","rank":99,"role":"train","gpus":[0],"span":"00000000000000aa","pid":5}` + "\n")
	edit(late, func(z []byte) []byte {
		z = enc.EncodeAll(extra, z)
		return runfiles.AppendSpan(z, float64(late*3600)-50, float64(late*3600)+10)
	})
	// 3. The reach's body damaged: read whole.
	damaged := withReach[2]
	edit(damaged, func(z []byte) []byte {
		z[len(z)-runfiles.SpanTrailerLen-20] ^= 0xff
		return z
	})
	if hasReach(garbled) == false || hasReach(late) || hasReach(damaged) {
		t.Fatalf("reach found: garbled %v (want true), late %v, damaged %v (want false)", hasReach(garbled), hasReach(late), hasReach(damaged))
	}
	got := sparseBlocks(t, dir)
	for _, h := range hs {
		g, w := factsOfBlock(got[h]), factsOfBlock(want[h])
		if h == late {
			w.Closed = append(w.Closed, fmt.Sprintf("late %v %v node-9/99/5 00000000000000aa [0] -1", float64(late*3600)-50, float64(late*3600)+10))
			w.Spans = append(w.Spans, "node-9/99/5/00000000000000aa")
			slices.Sort(w.Spans)
			w.MaxT = max(w.MaxT, float64(late*3600)+10)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("hour %+d (garbled %v, late %v, damaged %v): %+v\nwant\n%+v", h-int64(h0/3600), h == garbled, h == late, h == damaged, g, w)
		}
	}
}
