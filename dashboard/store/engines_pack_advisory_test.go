package store_test

import (
	"encoding/json"
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
		st, err := store.OpenPackedForTest(dir, pack)
		if err != nil {
			t.Fatal(err)
		}
		in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
		if p, _ := store.PackedSeriesForTest(st); (p > 0) != pack {
			t.Fatalf("pack=%v: %d series packed", pack, p)
		}
		if n := len(in.EngineHours.Hours); n < 4 || len(in.EngineHours.Hours[0].Metrics) < 4 {
			t.Fatalf("advisory input has %d engine hours, want the 4 the run writes with 4+ metrics", n)
		}
		ib := digestDump(in.EngineHours)
		res, err := json.Marshal(advisory.Compute(in))
		if err != nil {
			t.Fatal(err)
		}
		return ib, string(res)
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
