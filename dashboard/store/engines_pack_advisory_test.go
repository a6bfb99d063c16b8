package store_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestAdvisoryPackedAlike: the advisory over a run whose closed engine hours are packed is the advisory over the
// same run held as float64 columns, input and result alike.
func TestAdvisoryPackedAlike(t *testing.T) {
	dir := store.PackRunForTest(t)
	pass := func(pack bool) (string, string) {
		store.SetEngPackOffForTest(!pack)
		defer store.SetEngPackOffForTest(false)
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
		if p, _ := store.PackedSeriesForTest(st); (p > 0) != pack {
			t.Fatalf("pack=%v: %d series packed", pack, p)
		}
		if len(in.Engines) < 4 {
			t.Fatalf("advisory input has %d engine metrics, want the 4+ the run writes", len(in.Engines))
		}
		var bits []uint64 // NaN-safe and exact
		for _, m := range advisory.EngineMetrics {
			for _, r := range in.Engines[m] {
				for _, col := range [][]float64{r.TS, r.V, r.Sum, r.Buckets} {
					bits = append(bits, uint64(len(col)))
					for _, f := range col {
						bits = append(bits, math.Float64bits(f))
					}
				}
			}
		}
		ib, _ := json.Marshal(bits)
		res, err := json.Marshal(advisory.Compute(in))
		if err != nil {
			t.Fatal(err)
		}
		return string(ib), string(res)
	}
	rawIn, rawRes := pass(false)
	pkIn, pkRes := pass(true)
	if pkIn != rawIn {
		t.Fatal("advisory input differs between packed and raw engine hours")
	}
	if pkRes != rawRes {
		t.Fatalf("advisory differs:\npacked %s\nraw    %s", pkRes, rawRes)
	}
	t.Logf("%d B of advisory JSON, identical", len(pkRes))
}
