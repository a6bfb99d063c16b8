package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// keyedHour is a trajectories hour as real runs hold it, and the lines that test how a reader takes a line: bundles
// of sample attempts (random traces, consecutive samples, retries naming an older sample), weight updates, step
// consumes linking their batch, a consume naming its sample inside its span, a line whose trace id is not where the
// collector writes it, a sample named as a string or past MaxInt32, a member merely ending in "sample".
func keyedHour(rng *rand.Rand, first int) (text []byte, traces, samples []int) {
	var b strings.Builder
	span := func(typ, extra string) string {
		return fmt.Sprintf(`{"type":%q,"t0":0,"t1":%g,"span":"%016x"%s}`, typ, 1+rng.Float64()*50, rng.Uint64(), extra)
	}
	at := h0 + 10.0
	for i := range 400 {
		tr, s := first+i, first+i
		if rng.IntN(20) == 0 {
			s -= 1000 // a retry of an older sample
		}
		traces, samples = append(traces, tr), append(samples, s)
		at += rng.Float64() * 8
		b.WriteString(trajBundle(tr, s, at, span("generate", `,"turn":1,"wv":3`)+","+span("attempt", `,"status":"completed"`)))
		switch rng.IntN(40) {
		case 0:
			b.WriteString(trajBundle(first+5000+i, -1, at, span("weight_update", `,"wv":4`)))
		case 1:
			links := fmt.Sprintf(`,"step":3,"wv":3,"batch":2,"links":[%q,%q]`, tid(tr), tid(tr-1))
			b.WriteString(trajBundle(first+6000+i, -1, at, span("step_consume", links)))
		case 2:
			b.WriteString(trajBundle(first+7000+i, -1, at, span("consume", fmt.Sprintf(`,"sample":%d,"step":3`, s))))
		case 3:
			fmt.Fprintf(&b, `{"trace": %q,"t":%g,"sample":%d,"spans":[%s]}`+"\n", tid(first+8000+i), at, s, span("queue", ""))
		case 4:
			fmt.Fprintf(&b, `{"trace":%q,"t":%g,"sample":"%d","spans":[%s]}`+"\n", tid(first+9000+i), at, s, span("queue", ""))
		case 5:
			fmt.Fprintf(&b, `{"trace":%q,"t":%g,"sample":%d,"spans":[%s]}`+"\n", tid(first+9500+i), at, int64(math.MaxInt32)+7, span("queue", ""))
		case 6:
			fmt.Fprintf(&b, `{"trace":%q,"t":%g,"sub_sample":%d,"spans":[%s]}`+"\n", tid(first+9700+i), at, s, span("weight_update", ""))
		}
	}
	return []byte(b.String()), traces, samples
}

// writeKeyedRun writes text as a compacted trajectories hour of a run in dir, with its keys when withKeys.
func writeKeyedRun(t *testing.T, dir string, text []byte, withKeys bool) {
	t.Helper()
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	z := enc.EncodeAll(text, nil)
	if withKeys {
		k, ok, err := runfiles.HourKeysOf(bytes.NewReader(text), int64(len(text)))
		if err != nil || !ok {
			t.Fatalf("no keys: %v", err)
		}
		z = runfiles.AppendHourKeys(z, enc, int64(len(z)), k)
	}
	if first, last, ok := runfiles.SpanOfLines(text); ok {
		z = runfiles.AppendSpan(z, first, last)
	}
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/trajectories/"+hourName(int64(h0/3600))+runfiles.CompressedExt, string(z))
}

// recordsOf is what a block read for a query holds (its records, step consumes and weight updates, request ids,
// newest time), strings resolved, in order.
func recordsOf(b *trajBlock) string {
	var out strings.Builder
	for i := range b.records {
		r := &b.records[i]
		fmt.Fprintf(&out, "%x %x %x %x %d %q %d %d %d %d\n", math.Float64bits(r.t0), math.Float64bits(r.t1), r.trace, r.span, r.typ,
			b.read.str(r.status), r.sample, r.attempt, r.wv, r.step)
	}
	for _, ir := range b.indexed {
		r := &ir.rec
		fmt.Fprintf(&out, "indexed %x %x %x %d %d %d %d %x %d %d\n", math.Float64bits(r.t0), r.trace, r.span, r.typ, r.wv, r.step,
			ir.batch, ir.links, ir.at, r.sample)
	}
	var rids []string
	for k, v := range b.rids {
		rids = append(rids, fmt.Sprintf("rid %x %s\n", k, v))
	}
	slices.Sort(rids)
	out.WriteString(strings.Join(rids, ""))
	fmt.Fprintf(&out, "maxT %v\n", b.maxT)
	return out.String()
}

// TestHourKeysSkipOnlyWhatNoReaderKeeps: a compacted trajectories hour read for a query's traces and samples
// through its keys (runfiles.HourKeys) gives the records a read of its every line gives, for an anatomy's lookback
// (wantedTrajLine: its traces, their samples, weight updates) and for the pool's (its traces, weight updates, step
// consumes); an hour the query wants nothing of is read from its keyed lines alone.
func TestHourKeysSkipOnlyWhatNoReaderKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	text, traces, samples := keyedHour(rng, 100_000)
	with, without := t.TempDir(), t.TempDir()
	writeKeyedRun(t, with, text, true)
	writeKeyedRun(t, without, text, false)
	open := func(dir string) *Store {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stWith, stWithout := open(with), open(without)
	h := int64(h0 / 3600)
	skipped, read := 0, 0
	for q := range 300 {
		want, wantSamples := map[traceID]bool{}, map[int32]bool{}
		pick := func(n int, from []int, foreign int) {
			for range n {
				if rng.IntN(3) == 0 || len(from) == 0 {
					want[traceID(hexID16(foreign+rng.IntN(1000)))] = true
				} else {
					want[traceID(hexID16(from[rng.IntN(len(from))]))] = true
				}
			}
		}
		switch q % 3 {
		case 0: // none of the hour's
			pick(1+rng.IntN(20), nil, 900_000)
			for range 1 + rng.IntN(20) {
				wantSamples[int32(900_000+rng.IntN(1000))] = true //nolint:gosec // small
			}
		case 1: // one of its traces, among others
			pick(1+rng.IntN(5), traces, 900_000)
		default: // one of its samples alone
			pick(3, nil, 900_000)
			wantSamples[int32(samples[rng.IntN(len(samples))])] = true //nolint:gosec // small
		}
		wantSet, sampleSet := newTraceSet(want), newSampleSet(wantSamples)
		lookbackKeep := func(line []byte) bool { return wantedTrajLine(line, wantSet, sampleSet) }
		lookbackWants := func(k *runfiles.HourKeys) bool {
			for tr := range want {
				if k.HasTrace(tr) {
					read++
					return true
				}
			}
			for s := range wantSamples {
				if k.HasSample(s) {
					read++
					return true
				}
			}
			skipped++
			return false
		}
		got := recordsOf(stWith.trajectories.readRecordsOf(stWith.trajectories.files.Parts[h], lookbackKeep, lookbackWants))
		wantRecs := recordsOf(stWithout.trajectories.readRecordsOf(stWithout.trajectories.files.Parts[h], lookbackKeep, lookbackWants))
		if got != wantRecs {
			t.Fatalf("query %d (lookback): through the keys\n%s\nwant\n%s", q, got, wantRecs)
		}
		poolKeep := func(line []byte) bool {
			if tid, ok := lineTrace(line); !ok || wantSet.has(tid) {
				return true
			}
			if bytes.Contains(line[:min(len(line), 128)], []byte(`,"sample":`)) {
				return false
			}
			return bytes.Contains(line, []byte(`"type":"weight_update"`)) || bytes.Contains(line, []byte(`"type":"step_consume"`))
		}
		poolWants := func(k *runfiles.HourKeys) bool {
			for tr := range want {
				if k.HasTrace(tr) {
					return true
				}
			}
			return false
		}
		got = recordsOf(stWith.trajectories.readRecordsOf(stWith.trajectories.files.Parts[h], poolKeep, poolWants))
		wantRecs = recordsOf(stWithout.trajectories.readRecordsOf(stWithout.trajectories.files.Parts[h], poolKeep, poolWants))
		if got != wantRecs {
			t.Fatalf("query %d (pool): through the keys\n%s\nwant\n%s", q, got, wantRecs)
		}
	}
	if skipped < 50 || read < 50 {
		t.Fatalf("%d queries read the hour from its keys alone, %d read it: want both", skipped, read)
	}
}

// hexID16 is trace n's id as tid writes it.
func hexID16(n int) [16]byte {
	var id [16]byte
	for i := 15; i >= 0 && n > 0; i-- {
		id[i] = byte(n)
		n >>= 8
	}
	return id
}
