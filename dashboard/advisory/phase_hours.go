package advisory

import (
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The phase rules (A1 stall, S1 straggler rank) read the phases stream hour by hour, as the engine rules read
// theirs (docs/dashboard-api.md "GET /api/v1/advisory", "Phase statistics by hour"): each phases hour is reduced
// once to a digest — per closed phase its name, node, rank, step, start and length, and the hour's open markers
// that no closed record of the hour matched — and the rules combine the digests. A closed hour's digest is all the
// advisory needs of it, so the store keeps the digest and may drop the hour's records (docs/operations.md
// "Memory"). A phase is filed by its end hour and its open marker by its start hour: a marker pending in one hour
// is closed by a record of a later hour that started before that hour (PhaseHour.Closes).

// PhaseHours is the phases the rules read, one digest per hour in time order.
type PhaseHours struct {
	Hours []PhaseHour
}

// PhaseHour is one hour's digest (DigestPhaseHour). Names and Nodes are the hour's dictionaries, which Closed
// points into.
type PhaseHour struct {
	Hour         int64
	Names, Nodes []string
	Closed       []ClosedPhase
	// TrainGPUs is, per train rank of a straggler-eligible phase, the GPUs of its newest such phase in the hour.
	TrainGPUs map[RankKey]RankGPUs
	// Pending are the hour's open markers that no closed record of the hour matched, with their identities
	// (span id, or the v1 identity) in PendingIDs.
	Pending    []store.PhaseRecord
	PendingIDs []string
	// Closes are the identities of the hour's closed records that started in another hour: they may close a
	// marker pending there.
	Closes map[string]struct{}
}

// ClosedPhase is one closed phase of an hour, by its dictionaries' indices (40 bytes, against a few hundred for
// the record itself).
type ClosedPhase struct {
	T0, Dur                float64
	Name, Node, Rank, Step int32
	// Straggler says the straggler rule compares it across ranks (stragglerEligible).
	Straggler bool
}

// RankKey names a process: its node and rank.
type RankKey struct {
	Node string
	Rank int
}

// RankGPUs are a rank's GPUs as of its phase starting at T0.
type RankGPUs struct {
	T0   float64
	GPUs []int
}

// DigestPhaseHour reduces one phases hour (store.PhaseHourRecords) to what the phase rules read.
func DigestPhaseHour(hour int64, recs store.PhaseHourRecords) PhaseHour {
	d := PhaseHour{
		Hour: hour, Closed: make([]ClosedPhase, 0, len(recs.Closed)), TrainGPUs: map[RankKey]RankGPUs{},
		Pending: recs.Pending, PendingIDs: recs.PendingIDs, Closes: make(map[string]struct{}, len(recs.Closes)),
	}
	nameAt, nodeAt := map[string]int32{}, map[string]int32{}
	index := func(dict *[]string, at map[string]int32, s string) int32 {
		i, ok := at[s]
		if !ok {
			i = clamp32(len(*dict)) // one name per record at most: an hour's dictionary is far below the clamp
			*dict = append(*dict, s)
			at[s] = i
		}
		return i
	}
	for i := range recs.Closed {
		p := &recs.Closed[i]
		d.Closed = append(d.Closed, ClosedPhase{
			T0: p.T0, Dur: p.T1 - p.T0, Name: index(&d.Names, nameAt, p.Name), Node: index(&d.Nodes, nodeAt, p.Node),
			Rank: clamp32(p.Rank), Step: clamp32(p.Step), Straggler: stragglerEligible(p),
		})
		if stragglerEligible(p) {
			k := RankKey{p.Node, p.Rank}
			if g, ok := d.TrainGPUs[k]; !ok || p.T0 >= g.T0 {
				d.TrainGPUs[k] = RankGPUs{p.T0, p.GPUs}
			}
		}
	}
	for _, id := range recs.Closes {
		d.Closes[id] = struct{}{}
	}
	return d
}

// clamp32 keeps a rank or step in an int32 (a value outside is no real rank or step: it stays out of range).
func clamp32(v int) int32 { return int32(max(math.MinInt32, min(math.MaxInt32, v))) }

// stragglerEligible: a closed phase the straggler rule compares across ranks.
func stragglerEligible(p *store.PhaseRecord) bool {
	return !p.Open && p.Role == "train" && p.Step >= 0 && p.Rank >= 0 && !stragglerExcluded[p.Name]
}

// PhaseHoursOf digests a run's phase records (closed ones, and the open markers nobody closed, as
// store.AllPhases returns them) as one hour.
func PhaseHoursOf(recs []store.PhaseRecord) *PhaseHours {
	var hr store.PhaseHourRecords
	for _, p := range recs {
		if p.Open {
			hr.Pending = append(hr.Pending, p)
			hr.PendingIDs = append(hr.PendingIDs, "")
		} else {
			hr.Closed = append(hr.Closed, p)
		}
	}
	return &PhaseHours{Hours: []PhaseHour{DigestPhaseHour(0, hr)}}
}

// phaseStats is what the phase rules read, combined from the hours once per evaluation.
type phaseStats struct {
	// durs are the lengths of the closed phases of this attempt (started at or after Input.StartTS), by name.
	durs map[string][]float64
	// lastClosed is, per (node, rank, name), the newest start of a closed phase of this attempt.
	lastClosed map[stallKey]float64
	// open are the markers nobody closed, T1 at the data edge.
	open []store.PhaseRecord
	// train is, per phase name, step and rank, the summed length of the straggler-eligible phases.
	train map[string]map[int]map[RankKey]float64
	// gpus are the train ranks' GPUs (their newest eligible phase's).
	gpus map[RankKey]RankGPUs
}

type stallKey struct {
	node string
	rank int
	name string
}

// phaseStatsOf combines the hours' digests.
func phaseStatsOf(ph *PhaseHours, startTS, edge float64) *phaseStats {
	st := &phaseStats{
		durs: map[string][]float64{}, lastClosed: map[stallKey]float64{},
		train: map[string]map[int]map[RankKey]float64{}, gpus: map[RankKey]RankGPUs{},
	}
	closes := map[string]bool{}
	for i := range ph.Hours {
		for id := range ph.Hours[i].Closes {
			closes[id] = true
		}
	}
	for i := range ph.Hours {
		h := &ph.Hours[i]
		for _, p := range h.Closed {
			name, node := h.Names[p.Name], h.Nodes[p.Node]
			if p.T0 >= startTS {
				st.durs[name] = append(st.durs[name], p.Dur)
				k := stallKey{node, int(p.Rank), name}
				if t, ok := st.lastClosed[k]; !ok || p.T0 > t {
					st.lastClosed[k] = p.T0
				}
			}
			if !p.Straggler {
				continue
			}
			bySteps := st.train[name]
			if bySteps == nil {
				bySteps = map[int]map[RankKey]float64{}
				st.train[name] = bySteps
			}
			ranks := bySteps[int(p.Step)]
			if ranks == nil {
				ranks = map[RankKey]float64{}
				bySteps[int(p.Step)] = ranks
			}
			ranks[RankKey{node, int(p.Rank)}] += p.Dur
		}
		for k, g := range h.TrainGPUs {
			if cur, ok := st.gpus[k]; !ok || g.T0 >= cur.T0 {
				st.gpus[k] = g
			}
		}
		for j, m := range h.Pending {
			if id := h.PendingIDs[j]; id != "" && closes[id] {
				continue
			}
			m.T1 = math.Max(edge, m.T0)
			st.open = append(st.open, m)
		}
	}
	return st
}
