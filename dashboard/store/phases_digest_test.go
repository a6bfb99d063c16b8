package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// phaseRecKey writes a record out exactly, for comparing record sets.
func phaseRecKey(p PhaseRecord) string {
	return fmt.Sprintf("%s|%s|%d|%s|%v|%d|%v|%v|%v", p.Name, p.Node, p.Rank, p.Role, p.GPUs, p.Step, p.T0, p.T1, p.Open)
}

// phasesOfDigests puts the run's records back together from identity digests, as the advisory combines its
// digests: every closed record, and the pending markers no hour's Closes names, T1 at the edge.
func phasesOfDigests(st *Store) []string {
	ds, edge := st.PhaseDigests("identity", func(_ int64, recs PhaseHourRecords) any { return recs })
	closes := map[string]bool{}
	for _, d := range ds {
		for _, id := range d.Value.(PhaseHourRecords).Closes {
			closes[id] = true
		}
	}
	var out []string
	for _, d := range ds {
		recs := d.Value.(PhaseHourRecords)
		for _, p := range recs.Closed {
			out = append(out, phaseRecKey(p))
		}
		for i, p := range recs.Pending {
			if !closes[recs.PendingIDs[i]] {
				p.T1 = max(edge, p.T0)
				out = append(out, phaseRecKey(p))
			}
		}
	}
	slices.Sort(out)
	return out
}

func allPhasesKeys(st *Store) []string {
	recs, _ := st.AllPhases()
	out := make([]string, len(recs))
	for i, p := range recs {
		out[i] = phaseRecKey(p)
	}
	slices.Sort(out)
	return out
}

// TestPhaseDigestsAlike: the phases hours as digests see them (closed records by end hour, markers pending in
// their start hour, the closures that cross an hour) put back together give every record AllPhases gives —
// phases across hours, a 5-hour phase, markers closed hours later, a stalled marker, v1 identities, step-less
// v1 records — with every hour held, and with every hour dropped by the memory budget, where a second pass reads
// back only the open hours (closed hours' digests are kept, made before the drop).
func TestPhaseDigestsAlike(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(*testing.T) string
	}{{"otelcol-miles", phaseRun}, {"miles-v1", func(t *testing.T) string { return v1Run(t, true) }}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			ref, err := Open(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			want := allPhasesKeys(ref)
			if len(want) == 0 {
				t.Fatal("no phases in the fixture")
			}
			if got := phasesOfDigests(ref); !slices.Equal(got, want) {
				t.Fatalf("digests put back together (%d records) differ from AllPhases (%d)", len(got), len(want))
			}
			st, err := Open(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			b := NewBudget(1)
			st.SetBudget(b)
			for pass := range 3 {
				reloads := b.Reloads()
				if got := phasesOfDigests(st); !slices.Equal(got, want) {
					t.Fatalf("pass %d, every hour dropped: %d records put back together, AllPhases %d", pass, len(got), len(want))
				}
				closed, open, held := PhaseHoursForTest(st)
				if held != 0 {
					t.Fatalf("pass %d: %d phases hours held under a 1-byte budget", pass, held)
				}
				if pass > 0 && b.Reloads()-reloads != open {
					t.Fatalf("pass %d read %d dropped hours back; want the %d open one(s) only (%d closed, digests kept)", pass, b.Reloads()-reloads, open, closed)
				}
			}
		})
	}
}

// TestPhasesEvictedAlike: under a budget that drops every phases hour not in use, the phases view answers as a
// store that keeps every hour, for windows all over the run in any order (a window's hours and its reach hours
// are read back, whole and sparse).
func TestPhasesEvictedAlike(t *testing.T) {
	dir := phaseRun(t)
	ref, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBudget(1)
	st.SetBudget(b)
	lanes, _, _ := ref.Lanes("all")
	sel, _, _ := st.Lanes("all")
	var windows [][2]float64
	for i := range 24 {
		t0 := h0 + float64((i*7)%24)*1800 + 311
		windows = append(windows, [2]float64{t0, t0 + float64(1+i%5)*1300})
	}
	windows = append(windows, [2]float64{h0, h0 + 12*3600})
	for round := range 2 {
		for _, w := range windows {
			a, _ := jsonOf(ref.Phases(w[0], w[1], lanes))
			g, _ := jsonOf(st.Phases(w[0], w[1], sel))
			if a != g {
				t.Fatalf("round %d window %v: phases differ with the hours dropped:\n keep all %.300s\n budget   %.300s", round, w, a, g)
			}
		}
	}
	if b.Evictions() == 0 || b.Reloads() == 0 {
		t.Fatalf("evictions %d reloads %d: the phases hours were never dropped and read back", b.Evictions(), b.Reloads())
	}
}

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
