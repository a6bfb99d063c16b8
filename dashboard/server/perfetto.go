package server

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Perfetto trace (protos/perfetto/trace/perfetto_trace.proto) written field by field with protowire, the
// protobuf module's own wire encoder: a Trace is a stream of TracePacket fields, so the trace is appended to one
// buffer as it is built, never held as messages. Field numbers are Perfetto's; the trace is checked against
// Perfetto's own protos (PyPI perfetto) by the export tests.

// Field numbers of the messages written.
const (
	fTracePacket = 1 // Trace.packet

	fPacketChromeEvents = 5 // TracePacket.chrome_events (ChromeEventBundle: the trace's metadata entries)
	fBundleMetadata     = 2 // ChromeEventBundle.metadata
	fMetadataName       = 1 // ChromeMetadata.name
	fMetadataString     = 2 // ChromeMetadata.string_value
	fMetadataInt        = 4 // ChromeMetadata.int_value

	fPacketTimestamp  = 8  // TracePacket.timestamp
	fPacketSequenceID = 10 // TracePacket.trusted_packet_sequence_id
	fPacketTrackEvent = 11 // TracePacket.track_event
	fPacketSeqFlags   = 13 // TracePacket.sequence_flags
	fPacketTrackDesc  = 60 // TracePacket.track_descriptor

	fTrackUUID       = 1  // TrackDescriptor.uuid
	fTrackName       = 2  // TrackDescriptor.name
	fTrackParent     = 5  // TrackDescriptor.parent_uuid
	fTrackCounter    = 8  // TrackDescriptor.counter
	fTrackChildOrder = 11 // TrackDescriptor.child_ordering
	fTrackOrderRank  = 12 // TrackDescriptor.sibling_order_rank

	fCounterUnitName = 6 // CounterDescriptor.unit_name

	fEventAnnotation  = 4  // TrackEvent.debug_annotations
	fEventType        = 9  // TrackEvent.type
	fEventTrack       = 11 // TrackEvent.track_uuid
	fEventCategories  = 22 // TrackEvent.categories
	fEventName        = 23 // TrackEvent.name
	fEventDoubleValue = 44 // TrackEvent.double_counter_value

	fAnnotationInt    = 4  // DebugAnnotation.int_value
	fAnnotationDouble = 5  // DebugAnnotation.double_value
	fAnnotationString = 6  // DebugAnnotation.string_value
	fAnnotationName   = 10 // DebugAnnotation.name
)

// TrackEvent.Type values.
const (
	eventSliceBegin = 1
	eventSliceEnd   = 2
	eventInstant    = 3
	eventCounter    = 4
)

const (
	seqIncrementalCleared = 1 // TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
	childOrderingExplicit = 3 // TrackDescriptor.EXPLICIT
	sequenceID            = 1
)

// traceWriter appends TracePackets to one buffer.
type traceWriter struct {
	buf    []byte
	msg    []byte // scratch for a nested message
	first  bool
	tracks int
	events map[uint64]int // by TrackEvent.Type
}

func newTraceWriter() *traceWriter { return &traceWriter{first: true, events: map[uint64]int{}} }

// packet appends one TracePacket whose body is built by body (timestamp ts in ns when ts ≥ 0).
func (w *traceWriter) packet(ts int64, body func(b []byte) []byte) {
	var p []byte
	if ts >= 0 {
		p = protowire.AppendTag(p, fPacketTimestamp, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64(ts))
	}
	p = protowire.AppendTag(p, fPacketSequenceID, protowire.VarintType)
	p = protowire.AppendVarint(p, sequenceID)
	if w.first {
		p = protowire.AppendTag(p, fPacketSeqFlags, protowire.VarintType)
		p = protowire.AppendVarint(p, seqIncrementalCleared)
		w.first = false
	}
	p = body(p)
	w.buf = protowire.AppendTag(w.buf, fTracePacket, protowire.BytesType)
	w.buf = protowire.AppendBytes(w.buf, p)
}

// trackSpec describes one track.
type trackSpec struct {
	uuid, parent uint64
	name         string
	rank         int    // sibling order under its parent
	counterUnit  string // non-empty: a counter track of this unit
	explicit     bool   // its children are ordered by rank
}

func (w *traceWriter) track(t trackSpec) {
	w.tracks++
	w.packet(-1, func(p []byte) []byte {
		var d []byte
		d = protowire.AppendTag(d, fTrackUUID, protowire.VarintType)
		d = protowire.AppendVarint(d, t.uuid)
		d = protowire.AppendTag(d, fTrackName, protowire.BytesType)
		d = protowire.AppendString(d, t.name)
		if t.parent != 0 {
			d = protowire.AppendTag(d, fTrackParent, protowire.VarintType)
			d = protowire.AppendVarint(d, t.parent)
		}
		if t.counterUnit != "" {
			var c []byte
			c = protowire.AppendTag(c, fCounterUnitName, protowire.BytesType)
			c = protowire.AppendString(c, t.counterUnit)
			d = protowire.AppendTag(d, fTrackCounter, protowire.BytesType)
			d = protowire.AppendBytes(d, c)
		}
		if t.explicit {
			d = protowire.AppendTag(d, fTrackChildOrder, protowire.VarintType)
			d = protowire.AppendVarint(d, childOrderingExplicit)
		}
		d = protowire.AppendTag(d, fTrackOrderRank, protowire.VarintType)
		d = protowire.AppendVarint(d, protowire.EncodeZigZag(int64(t.rank)))
		p = protowire.AppendTag(p, fPacketTrackDesc, protowire.BytesType)
		return protowire.AppendBytes(p, d)
	})
}

// metadata appends the trace's metadata entries (name and a string or integer value) as the metadata of one
// ChromeEventBundle packet (perfetto_trace.proto). Written once, first.
func (w *traceWriter) metadata(entries []annotation) {
	if len(entries) == 0 {
		return
	}
	w.packet(-1, func(p []byte) []byte {
		var b []byte
		for _, e := range entries {
			var m []byte
			m = protowire.AppendTag(m, fMetadataName, protowire.BytesType)
			m = protowire.AppendString(m, e.name)
			if e.i != nil {
				m = protowire.AppendTag(m, fMetadataInt, protowire.VarintType)
				m = protowire.AppendVarint(m, varint64(*e.i))
			} else {
				m = protowire.AppendTag(m, fMetadataString, protowire.BytesType)
				m = protowire.AppendString(m, e.s)
			}
			b = protowire.AppendTag(b, fBundleMetadata, protowire.BytesType)
			b = protowire.AppendBytes(b, m)
		}
		p = protowire.AppendTag(p, fPacketChromeEvents, protowire.BytesType)
		return protowire.AppendBytes(p, b)
	})
}

// annotation is one debug annotation of an event: a string, an integer or a number.
type annotation struct {
	name string
	s    string
	i    *int64
	f    *float64
}

// varint64 is v as an int64 protobuf field's varint holds it (two's complement, the bits of uint64(v)): the low 63
// bits by a mask and the sign bit apart, so each conversion is in range.
func varint64(v int64) uint64 { return uint64(v&math.MaxInt64) | uint64(v>>63&1)<<63 }

// event appends a TrackEvent at ts (Unix seconds).
func (w *traceWriter) event(typ, track uint64, ts float64, name, category string, value float64, ann []annotation) {
	w.events[typ]++
	w.packet(nanos(ts), func(p []byte) []byte {
		e := w.msg[:0]
		e = protowire.AppendTag(e, fEventType, protowire.VarintType)
		e = protowire.AppendVarint(e, typ)
		e = protowire.AppendTag(e, fEventTrack, protowire.VarintType)
		e = protowire.AppendVarint(e, track)
		if name != "" && typ != eventSliceEnd && typ != eventCounter {
			e = protowire.AppendTag(e, fEventName, protowire.BytesType)
			e = protowire.AppendString(e, name)
		}
		if category != "" && typ != eventCounter {
			e = protowire.AppendTag(e, fEventCategories, protowire.BytesType)
			e = protowire.AppendString(e, category)
		}
		if typ == eventCounter {
			e = protowire.AppendTag(e, fEventDoubleValue, protowire.Fixed64Type)
			e = protowire.AppendFixed64(e, math.Float64bits(value))
		}
		for _, a := range ann {
			var d []byte
			d = protowire.AppendTag(d, fAnnotationName, protowire.BytesType)
			d = protowire.AppendString(d, a.name)
			switch {
			case a.i != nil:
				d = protowire.AppendTag(d, fAnnotationInt, protowire.VarintType)
				d = protowire.AppendVarint(d, varint64(*a.i))
			case a.f != nil:
				d = protowire.AppendTag(d, fAnnotationDouble, protowire.Fixed64Type)
				d = protowire.AppendFixed64(d, math.Float64bits(*a.f))
			default:
				d = protowire.AppendTag(d, fAnnotationString, protowire.BytesType)
				d = protowire.AppendString(d, a.s)
			}
			e = protowire.AppendTag(e, fEventAnnotation, protowire.BytesType)
			e = protowire.AppendBytes(e, d)
		}
		w.msg = e
		p = protowire.AppendTag(p, fPacketTrackEvent, protowire.BytesType)
		return protowire.AppendBytes(p, e)
	})
}

// nanos is Unix seconds as the trace's nanoseconds (the default clock, BOOTTIME, read as Unix time here).
func nanos(ts float64) int64 { return int64(math.Round(ts * 1e9)) }
