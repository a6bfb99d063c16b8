package store_test

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestV1StragglerRankEvaluated: on a miles v1 run (phases carry no step) the straggler-rank rule runs and finds
// rank 1, 30 % slower at actor_train in every step.
func TestV1StragglerRankEvaluated(t *testing.T) {
	st, err := store.Open(store.V1RunForTest(t, true), false)
	if err != nil {
		t.Fatal(err)
	}
	res := advisory.Compute(server.AdvisoryInput(st, advisory.Config{}, nil))
	for _, a := range res.Advisories {
		if a.ID == "S1" {
			if ev, ok := a.Evidence.(advisory.StragglerRankEvidence); !ok || ev.Rank != 1 || ev.Phase != "actor_train" {
				t.Errorf("S1 evidence %+v, want rank 1 at actor_train", a.Evidence)
			}
			return
		}
	}
	t.Fatalf("no S1 straggler advisory; skipped: %+v", res.Skipped)
}
