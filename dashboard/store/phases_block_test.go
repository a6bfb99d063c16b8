package store

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPhaseAddLine: the phases parse of a cold open, one hour of a 128-rank trainer's phase records as the
// exporter writes them (the fast path, no encoding/json).
func BenchmarkPhaseAddLine(b *testing.B) {
	names := []string{"actor_train", "train_wait", "ref_logprob", "update_weights", "rollout_wait"}
	var lines [][]byte
	t := 1797120000.0
	for step := range 60 {
		for rank := range 128 {
			for i, name := range names {
				t0 := t + float64(step*60+i*10) + float64(rank)*0.001234
				lines = append(lines, fmt.Appendf(nil, `{"name":%q,"t0":%.6f,"t1":%.6f,"node":"10.1.0.%d","rank":%d,"role":"train","gpus":[%d],"step":%d,"span":"%016x","parent":"%016x"}`,
					name, t0, t0+9.5+float64(rank%7)*0.01, rank/8+1, rank, rank%8, step, step*1000+rank*10+i, step*1000+rank))
			}
		}
	}
	for b.Loop() {
		blk := newPhaseBlock(false)
		for _, line := range lines {
			if !blk.addLine(line) {
				b.Fatalf("rejected %s", line)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}

// TestKeyIndex: the key search finds a key's first occurrence, as a search for the whole key does, over keys
// repeated, overlapping, quoted inside values and at the line's ends.
func TestKeyIndex(t *testing.T) {
	lines := []string{
		`{"name":"x","t0":1,"t1":2,"span":"ab"}`,
		`{"t0":1}`, `"t0":`, `t0":1`, `{"xt0":1,"t0":2}`, `{"a":"t0\":","t0":3}`, `{"t0""t0":1}`, ``,
		`{"span":"a","span":"b"}`, `{"spanspan":"x","span":"y"}`, `""t0":`,
	}
	for _, l := range lines {
		for _, key := range []string{`"t0":`, `"span":"`, `"t1":`, `"name":"`} {
			if got, want := keyIndex([]byte(l), key), strings.Index(l, key); got != want {
				t.Errorf("%q in %q: %d, want %d", key, l, got, want)
			}
		}
	}
}
