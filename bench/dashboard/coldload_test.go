package dashboard

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// BenchmarkColdLoad: open the run and load one hour of every lane (the work behind a cold first view).
func BenchmarkColdLoad(b *testing.B) {
	dir := runDir(b)
	for i := 0; i < b.N; i++ {
		st, err := store.Open(dir, false)
		if err != nil {
			b.Fatal(err)
		}
		t0, t1, err := st.Window(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		l, _, _ := st.Lanes("all")
		st.GPU(t0, t1, l, 10, []string{"util"})
	}
}
