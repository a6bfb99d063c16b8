package jsonlexporter

import (
	"encoding/hex"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// mapLogs handles the log events of docs/semconv.md: phase open markers (§2), topology snapshots (§5) and run
// configurations (§11, marshal_runconfig.go).
func mapLogs(ld plog.Logs, r *records) {
	buf := make([]byte, 0, 512)
	for _, rl := range ld.ResourceLogs().All() {
		node, _ := attrStr(rl.Resource().Attributes(), sc.HostName)
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ts := lr.Timestamp()
				if ts == 0 {
					ts = lr.ObservedTimestamp()
				}
				switch ev := eventName(lr); {
				case ev != sc.EventPhaseStart && ev != sc.EventTopology && ev != sc.EventRunConfig:
					r.unmapped++
				case !r.timeOK(ts):
					continue
				case ev == sc.EventPhaseStart:
					if lr.SpanID().IsEmpty() {
						r.invalid++ // without the span id no closed phase could ever replace it
						continue
					}
					name, _ := attrStr(lr.Attributes(), sc.PhaseName)
					p, ok := checkPhase(r, node, name, lr.Attributes())
					if !ok {
						continue
					}
					p.pid, _ = attrInt(rl.Resource().Attributes(), sc.ProcessPID)
					buf = appendPhase(buf[:0], r, p, ts, 0, true, lr.SpanID(), markerParent(lr.Attributes()))
					r.add(sc.StreamPhases, ts, buf)
				case ev == sc.EventRunConfig:
					var ok bool
					if buf, ok = appendRunConfig(buf[:0], r, ts, rl.Resource().Attributes(), lr.Body()); ok {
						r.add(sc.StreamRunConfig, ts, buf)
					}
				default: // topology
					var ok bool
					if buf, ok = appendTopology(buf[:0], r, ts, lr.Body()); ok {
						r.add(sc.StreamTopology, ts, buf)
					}
				}
			}
		}
	}
}

// markerParent is the enclosing phase an open marker names (miles.phase.parent, docs/semconv.md §2), so the
// marker is drawn nested while it runs; empty when absent or not 16 hex digits.
func markerParent(attrs pcommon.Map) pcommon.SpanID {
	var id pcommon.SpanID
	s, ok := attrStr(attrs, sc.PhaseParent)
	if !ok || len(s) != 2*len(id) {
		return pcommon.NewSpanIDEmpty()
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return pcommon.NewSpanIDEmpty()
	}
	return id
}

func eventName(lr plog.LogRecord) string {
	if n := lr.EventName(); n != "" {
		return n
	}
	n, _ := attrStr(lr.Attributes(), sc.EventNameAttr)
	return n
}

// appendTopology writes {"ts":…,"engines":[…]} and learns which engine runs on which lane. A body that is not
// a topology counts as invalid, one over the ingest limits as over_limit; neither is written.
func appendTopology(b []byte, r *records, ts pcommon.Timestamp, body pcommon.Value) ([]byte, bool) {
	if body.Type() != pcommon.ValueTypeMap {
		r.invalid++
		return b, false
	}
	ev, ok := body.Map().Get("engines")
	if !ok || ev.Type() != pcommon.ValueTypeSlice {
		r.invalid++
		return b, false
	}
	engines := ev.Slice()
	if broken := checkTopology(engines); broken != "" {
		r.overLimit(1, broken)
		return b, false
	}
	o := beginObj(b)
	o.time("ts", ts)
	o.key("engines")
	o.b = appendValue(o.b, ev, 0)
	for _, e := range engines.All() {
		if e.Type() != pcommon.ValueTypeMap {
			continue
		}
		em := e.Map()
		addr, _ := attrStr(em, "addr")
		gv, ok := em.Get("gpus")
		if !ok || gv.Type() != pcommon.ValueTypeSlice {
			continue
		}
		uuids := attrSlice(em, "gpu_uuids")
		for i, pair := range gv.Slice().All() {
			if pair.Type() != pcommon.ValueTypeSlice || pair.Slice().Len() != 2 {
				continue
			}
			gpu, ok := valueInt(pair.Slice().At(1))
			if !ok {
				continue
			}
			f := laneFact{node: pair.Slice().At(0).AsString(), gpu: gpu, rank: -1, engine: addr}
			if uuids.Len() > i {
				f.uuid = uuids.At(i).AsString()
			}
			r.lanes = append(r.lanes, f)
		}
	}
	return o.line(), true
}
