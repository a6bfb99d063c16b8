package store

import (
	"bytes"
	"slices"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The engine spans of an explanation's critical chains (docs/semconv.md §12.1): a step's explanation joins
// engine spans to the few samples of its batch's critical chain only, so the chains of every step it reads are
// found first and their spans read in one go: from the reader's hours where it holds them all, else by reading
// the hours' files for those traces alone. An hour of a 1024-GPU run holds ~300 MB of engine spans; the chains
// need a few dozen traces of it, and the hour is neither parsed whole nor kept.

// chainEngines are the engine spans the chains join: their traces (and the requests their segments name by
// sglang request id), in the hours they join. Nothing the reader holds is shared with the answer: it reads them
// without the store's lock.
func (s *Store) chainEngines(chains []*chainRows) engineHours {
	want := map[traceID]bool{}
	rids := map[string]bool{}
	lo, hi := int64(1)<<62, -int64(1)<<62
	for _, c := range chains {
		if !c.join {
			continue
		}
		lo, hi = min(lo, c.lo), max(hi, c.hi)
		for i := range c.want {
			for _, g := range c.b.rows[i].gens {
				want[g.trace] = true
				if rid := ridOf(c.b.blocks, g); rid != "" {
					rids[rid] = true
				}
			}
		}
	}
	out := engineHours{hours: map[int64]*traceHour{}, names: &interner{}}
	out.names.init()
	if len(want) == 0 {
		return out
	}
	defer s.pin()()
	r := &s.engineTraces
	s.mu.RLock()
	var parts []*partition.Partition
	held := true
	for h := lo; h <= hi; h++ {
		if p := r.files.Parts[h]; p != nil {
			parts = append(parts, p.Unstarted())
			held = held && r.hours[h] != nil && p.Loaded
		}
	}
	if held {
		// The reader holds every hour: the chains' traces are copied out of them (the requests' own traces in
		// every hour, as a join reads them).
		out.names.strings = slices.Clone(r.names.strings)
		for h := lo; h <= hi; h++ {
			if th := r.hours[h]; th != nil {
				for rid := range rids {
					if tid, ok := th.byRID[rid]; ok {
						want[tid] = true
					}
				}
			}
		}
		for h := lo; h <= hi; h++ {
			th := r.hours[h]
			if th == nil {
				continue
			}
			sub := &traceHour{byTrace: map[traceID][]engSpan{}, byRID: map[string]traceID{}}
			for tid := range want {
				if spans, ok := th.byTrace[tid]; ok {
					sub.byTrace[tid] = slices.Clone(spans)
				}
			}
			for rid := range rids {
				if tid, ok := th.byRID[rid]; ok {
					sub.byRID[rid] = tid
				}
			}
			out.hours[h] = sub
		}
		s.mu.RUnlock()
		return out
	}
	s.mu.RUnlock()
	read := make([]*traceHour, len(parts))
	readAll := func() {
		onCores(len(parts), func(i int) { read[i] = r.readTraces(parts[i], want, rids) })
	}
	readAll()
	// A request sent without a traceparent is a trace of its own: once its request id named it, its records in
	// every hour are read too (a second pass, rare: a join by trace needs none).
	more := false
	for _, th := range read {
		for _, tid := range th.byRID {
			if !want[tid] {
				want[tid], more = true, true
			}
		}
	}
	if more {
		readAll()
	}
	for i, th := range read {
		th.adoptNames(out.names) // the hours' names become the answer's own
		out.hours[parts[i].Hour] = th
	}
	return out
}

// readTraces reads, from hour p's files read from their start (p is the query's copy), the records of the traces
// want and those whose requests carry an sglang request id of rids. Other records are skipped unparsed; a record
// of those traces that is not valid is skipped as the reader skips it (the reader counts and reports it when it
// reads the hour).
func (r *engineTraceReader) readTraces(p *partition.Partition, want map[traceID]bool, rids map[string]bool) *traceHour {
	th := &traceHour{byTrace: map[traceID][]engSpan{}, read: &interner{}}
	th.read.init()
	_, _ = r.files.Read(p.Unstarted(), func(line []byte) bool {
		if wantedLine(line, want, rids) {
			r.engineLine(th, line)
		}
		return true
	})
	return th
}

// lineTrace is the trace of a record as the collector writes it (docs/semconv.md §8.3, §10.2), read without
// parsing the line; false when the line does not begin so (a reader that filters lines then parses it, to be sure).
func lineTrace(line []byte) (traceID, bool) {
	id, ok := runfiles.LineTrace(line)
	return traceID(id), ok
}

// wantedLine says whether an engine_traces line is a record of a trace of want, or names a request id of rids.
func wantedLine(line []byte, want map[traceID]bool, rids map[string]bool) bool {
	if tid, ok := lineTrace(line); !ok || want[tid] {
		return true
	}
	if len(rids) == 0 {
		return false
	}
	for rest := line; ; {
		i := bytes.Index(rest, []byte(`"rid":"`))
		if i < 0 {
			return false
		}
		rest = rest[i+7:]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return false
		}
		if rids[string(rest[:j])] {
			return true
		}
	}
}
