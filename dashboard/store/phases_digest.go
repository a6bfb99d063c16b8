package store

import (
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// Phase hour digests: a caller's reduction of each phases hour (the advisory's phase statistics,
// dashboard/advisory), kept per closed hour so that a reader of the whole run never needs the records of an
// hour the memory budget dropped (docs/operations.md "Memory"). A closed hour's digests are made when the
// budget drops it, or when first asked for; an hour whose records change (late records, a file read again with
// other records) loses them, and so does an hour with step-less records when the step bounds move (its records'
// steps come from them). An open hour is reduced again at every call.

// PhaseHourRecords is one phases hour as a digest function reads it: its closed records, and its open markers
// that no closed record of the hour matched. A phase is filed by its end hour and its marker by its start hour,
// so a pending marker may be closed by a record of a later hour: Closes are the identities of the hour's closed
// records that started in another hour, PendingIDs those of the pending markers. Records carry their step as
// AllPhases gives it (from the step bounds when they have none); a pending marker's T1 is its T0.
type PhaseHourRecords struct {
	Closed     []PhaseRecord
	Pending    []PhaseRecord
	PendingIDs []string
	Closes     []string
}

// PhaseDigest is one hour's value of a digest function.
type PhaseDigest struct {
	Hour  int64
	Value any
}

// phaseDigest is a kept digest value and whether it read the step bounds (a record without a step).
type phaseDigest struct {
	value    any
	stepless bool
}

// PhaseDigests reduces every phases hour, in time order, with fn, and returns the data edge open markers are
// measured against. A closed hour's value is kept under key until the hour changes, and made before the budget
// drops the hour from then on; hours read for this call alone are left least recently used, so the whole-run
// reduction does not push out the hours the pages read.
func (s *Store) PhaseDigests(key string, fn func(hour int64, recs PhaseHourRecords) any) (out []PhaseDigest, edge float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.phases
	if _, ok := r.digesters[key]; !ok {
		r.digesters[key] = fn
	}
	bounds := s.phaseBoundsLocked()
	hours := r.files.Hours()
	out = make([]PhaseDigest, 0, len(hours))
	for _, h := range hours {
		if d, ok := r.digests[h][key]; ok {
			out = append(out, PhaseDigest{h, d.value})
			continue
		}
		read := !r.files.Parts[h].Loaded
		if read {
			s.loadLocked(r.cache.jobs([]int64{h}, hourRead{}))
		}
		var v any
		if r.files.Closed(h) {
			r.digestLocked(h, bounds)
			v = r.digests[h][key].value
		} else { // open: reduced at every call
			recs, _ := r.hourRecordsLocked(h, bounds)
			v = fn(h, recs)
		}
		out = append(out, PhaseDigest{h, v})
		if read {
			s.settleColdLocked(heldPhase, h) // hour by hour: a long run opened cold never holds all its hours
		}
	}
	return out, s.edge
}

// phaseBoundsLocked is the step bounds step-less phases take their step from (phaseReader.boundsLocked).
func (s *Store) phaseBoundsLocked() stepBounds { return s.phases.boundsLocked(s) }

// boundsLocked is the step bounds step-less phases take their step from, read by the metrics reader (which
// hands what it reads to ld); digests that read other bounds are forgotten. The caller holds Store.mu for
// writing.
func (r *phaseReader) boundsLocked(ld loadApplier) stepBounds {
	b := r.metrics.stepBoundsLocked(ld)
	sig := [2]float64{float64(len(b.steps)), math.Inf(-1)}
	if n := len(b.ends); n > 0 {
		sig[1] = b.ends[n-1]
	}
	if sig != r.digestBounds {
		for h, ds := range r.digests {
			for k, d := range ds {
				if d.stepless {
					delete(ds, k)
				}
			}
			if len(ds) == 0 {
				delete(r.digests, h)
			}
		}
		r.digestBounds = sig
	}
	return b
}

// digestBeforeDropLocked makes the registered digests the closed hour h lacks, from its block, which the
// budget is about to drop (an open hour is digested at every call anyway).
func (r *phaseReader) digestBeforeDropLocked(ld loadApplier, h int64) {
	if b := r.blocks[h]; b == nil || b.sparse || len(r.digesters) == 0 || !r.files.Closed(h) {
		return
	}
	r.digestLocked(h, r.boundsLocked(ld))
}

// digestLocked computes the registered digests the closed, loaded hour h lacks.
func (r *phaseReader) digestLocked(h int64, bounds stepBounds) {
	var recs PhaseHourRecords
	var stepless, made bool
	for key, fn := range r.digesters {
		if _, ok := r.digests[h][key]; ok {
			continue
		}
		if !made {
			recs, stepless = r.hourRecordsLocked(h, bounds)
			made = true
		}
		if r.digests[h] == nil {
			r.digests[h] = map[string]phaseDigest{}
		}
		r.digests[h][key] = phaseDigest{fn(h, recs), stepless}
	}
}

// hourRecordsLocked is hour h's block as a digest function reads it (PhaseHourRecords), and whether some record
// took its step from bounds. The hour is loaded whole.
func (r *phaseReader) hourRecordsLocked(h int64, bounds stepBounds) (out PhaseHourRecords, stepless bool) {
	b := r.blocks[h]
	if b == nil {
		return out, false
	}
	lo, hi := float64(h)*3600, float64(h+1)*3600
	conv := func(p *phaseRec) PhaseRecord {
		pr := PhaseRecord{Name: p.Name, Node: p.Node, Rank: p.Rank, Role: p.Role, GPUs: p.GPUs, Step: p.step, T0: p.T0, T1: p.T0, Open: p.isOpen}
		if p.Step == nil {
			pr.Step = bounds.of(p.T0)
			stepless = true
		}
		if !p.isOpen {
			pr.T1 = p.end
		}
		return pr
	}
	out.Closed = make([]PhaseRecord, 0, len(b.closed))
	for i := range b.closed {
		p := &b.closed[i]
		out.Closed = append(out.Closed, conv(p))
		if h != partition.LegacyHour && (p.T0 < lo || p.T0 >= hi) {
			out.Closes = append(out.Closes, p.identity())
		}
	}
	for i := range b.open {
		if p := &b.open[i]; !b.isClosed(p) {
			out.Pending = append(out.Pending, conv(p))
			out.PendingIDs = append(out.PendingIDs, p.identity())
		}
	}
	return out, stepless
}
