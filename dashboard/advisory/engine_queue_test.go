package advisory

import (
	"strings"
	"testing"
)

func TestEngineQueueing(t *testing.T) {
	find := func(r Result) (*Advisory, *Skip) {
		for i := range r.Advisories {
			if r.Advisories[i].ID == "T5" {
				return &r.Advisories[i], nil
			}
		}
		for i := range r.Skipped {
			if r.Skipped[i].ID == "T5" {
				return nil, &r.Skipped[i]
			}
		}
		return nil, nil
	}
	for _, c := range []struct {
		name  string
		q     *EngineQueue
		fires bool
		skips string
		worst string
	}{
		{"no traces", nil, false, "", ""},
		{"too few", &EngineQueue{Steps: []int{1}, Segments: 5, GenS: 10, QueueS: 9}, false, "only 5", ""},
		{"decode bound", &EngineQueue{
			Steps: []int{1, 2}, Segments: 64, GenS: 100, QueueS: 20,
			ByEngine: map[string][2]float64{"http://a": {50, 10}, "http://b": {50, 10}},
		}, false, "", ""},
		{"queue bound", &EngineQueue{
			Steps: []int{1, 2}, Segments: 64, GenS: 100, QueueS: 62,
			ByEngine: map[string][2]float64{"http://a": {50, 20}, "http://b": {50, 42}},
		}, true, "", "http://b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, s := find(Compute(Input{EngineQueue: c.q}))
			if c.fires != (a != nil) {
				t.Fatalf("fired %v, want %v (skip %+v)", a != nil, c.fires, s)
			}
			if c.skips != "" && (s == nil || !strings.Contains(s.Reason, c.skips)) {
				t.Fatalf("skip %+v, want one saying %q", s, c.skips)
			}
			if a != nil {
				ev := a.Evidence.(EngineQueueEvidence)
				if ev.WorstEngine != c.worst || ev.Frac != 0.62 || a.Tier != "tip" {
					t.Errorf("evidence %+v tier %s", ev, a.Tier)
				}
			}
		})
	}
}
