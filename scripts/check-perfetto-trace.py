#!/usr/bin/env python3
"""Parse a Perfetto trace with Perfetto's own protos (PyPI perfetto: perfetto.protos...perfetto_trace_pb2) and
print what it holds as JSON: tracks (by kind), slices, instants, counter values, and whether every track's
slices nest (each end closes the innermost open slice, nothing left open). Used by the dashboard's export tests
(dashboard/server export_test.go, the browser test); never needs trace_processor.

    check-perfetto-trace.py TRACE
"""
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent


def main(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks, counter_tracks, names = {}, set(), {}
    out = {"packets": len(trace.packet), "tracks": 0, "counter_tracks": 0, "slices": 0, "instants": 0,
           "counters": 0, "unknown_track_refs": 0, "nesting_errors": 0, "open_at_end": 0,
           "slice_names": {}, "instant_names": [], "track_names": [], "max_depth": 0, "metadata": {}}
    for p in trace.packet:
        if p.HasField("chrome_events"):
            for m in p.chrome_events.metadata:
                out["metadata"][m.name] = m.int_value if m.HasField("int_value") else m.string_value
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = d.parent_uuid
            names[d.uuid] = d.name
            out["track_names"].append(d.name)
            if d.HasField("counter"):
                counter_tracks.add(d.uuid)
    out["tracks"] = len(tracks)
    out["counter_tracks"] = len(counter_tracks)
    stacks = {}
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.track_uuid not in tracks:
            out["unknown_track_refs"] += 1
        st = stacks.setdefault(e.track_uuid, [])
        if e.type == TE.TYPE_SLICE_BEGIN:
            if st and p.timestamp < st[-1]:
                out["nesting_errors"] += 1
            st.append(p.timestamp)
            out["slices"] += 1
            out["slice_names"][e.name] = out["slice_names"].get(e.name, 0) + 1
            out["max_depth"] = max(out["max_depth"], len(st))
        elif e.type == TE.TYPE_SLICE_END:
            if not st or p.timestamp < st[-1]:
                out["nesting_errors"] += 1
            else:
                st.pop()
        elif e.type == TE.TYPE_INSTANT:
            out["instants"] += 1
            out["instant_names"].append(e.name)
        elif e.type == TE.TYPE_COUNTER:
            if e.track_uuid not in counter_tracks:
                out["unknown_track_refs"] += 1
            out["counters"] += 1
    out["open_at_end"] = sum(len(s) for s in stacks.values())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
