package store

import (
	"fmt"
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
