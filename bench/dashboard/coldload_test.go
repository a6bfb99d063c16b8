package dashboard

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// BenchmarkColdLoad: open the run and answer a wide view of every lane: from gpu_rollup where the run has it
// (rollup), and from gpu_util, parsing the whole hour (raw: the work behind a first fine view, and behind every
// first view before the roll-up).
func BenchmarkColdLoad(b *testing.B) {
	for _, roll := range []bool{true, false} {
		b.Run(map[bool]string{true: "rollup", false: "raw"}[roll], func(b *testing.B) { coldLoad(b, roll) })
	}
}

func coldLoad(b *testing.B, roll bool) {
	dir := runDir(b)
	for i := 0; i < b.N; i++ {
		st, err := store.Open(dir, false)
		if err != nil {
			b.Fatal(err)
		}
		st.SetRollup(roll)
		t0, t1, err := st.Window(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		l, _, _ := st.Lanes("all")
		st.GPU(t0, t1, l, 10, []string{"util"})
	}
}
