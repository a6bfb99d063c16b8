package store

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"
)

// foldedKey finds the record's keys as encoding/json matches them, in any case.
var foldedKey = regexp.MustCompile(`(?i)"(trace|t|parent|spans|k|name|span|rid|label|lvl|t0|t1|tp|dp|pp|err)"`)

// engineLineJSON is engineLine as encoding/json reads a record: the reference the in-place reader must agree with
// on every record that decodes (docs/semconv.md §10.2).
func engineLineJSON(t *testing.T, in *interner, line []byte) (map[traceID][]engSpan, map[string]traceID, bool) {
	t.Helper()
	var rec struct {
		Trace  string  `json:"trace"`
		T      float64 `json:"t"`
		Parent *string `json:"parent"`
		Spans  []struct {
			K, Name, Span, RID, Label string
			Lvl                       int8
			T0, T1                    *float64
			Parent                    *string
			TP, DP, PP                *int32
			Err                       bool
		} `json:"spans"`
	}
	if json.Unmarshal(line, &rec) != nil || len(rec.Trace) != 32 || len(rec.Spans) == 0 {
		return nil, nil, false
	}
	var tid traceID
	if _, err := hex.Decode(tid[:], []byte(rec.Trace)); err != nil {
		return nil, nil, false
	}
	var def spanID
	hasDef := false
	if rec.Parent != nil {
		def, hasDef = parseSpanIDBytes([]byte(*rec.Parent))
	}
	byRID := map[string]traceID{}
	var out []engSpan
	for _, m := range rec.Spans {
		id, ok := parseSpanIDBytes([]byte(m.Span))
		if !ok || m.T0 == nil || m.T1 == nil || hasSpan(out, id) {
			continue
		}
		s := engSpan{
			t0: micros(rec.T + *m.T0), t1: micros(rec.T + *m.T1), id: id, parent: def, hasParent: hasDef,
			tp: -1, dp: -1, pp: -1, lvl: m.Lvl, errorStatus: m.Err,
		}
		if m.Parent != nil {
			s.parent, s.hasParent = parseSpanIDBytes([]byte(*m.Parent))
		}
		switch m.K {
		case "req":
			s.kind = ekRequest
			if !s.hasParent && m.RID != "" && len(m.RID) <= laneKeyMax {
				byRID[m.RID] = tid
			}
		case "thread":
			s.kind = ekThread
			s.label = in.id([]byte(m.Label))
			for _, p := range [...]struct{ v, dst *int32 }{{m.TP, &s.tp}, {m.DP, &s.dp}, {m.PP, &s.pp}} {
				if p.v != nil {
					*p.dst = *p.v
				}
			}
		default:
			s.name = in.id([]byte(m.Name))
		}
		out = append(out, s)
	}
	return map[traceID][]engSpan{tid: out}, byRID, true
}

var engineLineCases = []string{
	// sglang's shapes as the collector writes them (internal/fakesglang): a request, its threads and slices.
	`{"trace":"c9ea529c305a7cbbc3732a57e3a2c5f7","t":1796119217.565172,"parent":"2518810ca0b32053","spans":[{"k":"req","t0":0,"t1":0.771498,"span":"adcd6e18ffb904cc","parent":"ff274fed666d84dd","rid":"4ccb28d74540f9a52db45833664d008a"},{"k":"thread","t0":0,"t1":0.0006,"span":"1493f0630baf0986","parent":"adcd6e18ffb904cc","label":"Tokenizer"},{"name":"tokenize","lvl":1,"t0":0,"t1":0.0003,"span":"cd994a3edd875378","parent":"1493f0630baf0986"},{"k":"thread","t0":0.0006,"t1":0.770998,"span":"2518810ca0b32053","parent":"adcd6e18ffb904cc","label":"Scheduler","tp":0,"pp":0},{"name":"decode_forward","lvl":1,"t0":0.1259,"t1":0.770998,"span":"d2484e0e52487248"}]}`,
	// A request sent without a traceparent (a root of its own, found by rid), an error, dp rank, escapes.
	`{"trace":"0f3da8529a4e3e17fdb823e1b7366c4c","t":1796119217.535172,"spans":[{"k":"req","t0":0,"t1":1.5,"span":"32df3adb4233dae0","rid":"r\u00e9q-1","err":true},{"k":"thread","t0":0,"t1":1,"span":"4a77fc6c0634e1be","parent":"32df3adb4233dae0","label":"Sched\"uler","tp":3,"dp":2,"pp":null},{"name":"pre\\fill","lvl":-2,"t0":0.5,"t1":1e-1,"span":"4a77fc6c0634e1bf"}]}`,
	// Keys in another order, white space, nulls, a span written twice, spans without times or ids (skipped).
	` { "spans" : [ {"span":"aaaaaaaaaaaaaaaa","t1":2,"t0":1,"name":"x","parent":null} , {"span":"aaaaaaaaaaaaaaaa","t0":5,"t1":6,"name":"dup"},{"span":"bbbbbbbbbbbbbbbb","t0":null,"t1":1},{"t0":1,"t1":2,"name":"noid"},{"span":"short","t0":1,"t1":2} ] , "parent" : null, "t" : 100.25 , "trace" : "0f3da8529a4e3e17fdb823e1b7366c4d" } `,
	// Refused: no spans, an empty list, a bad trace id, not an object, a torn line.
	`{"trace":"0f3da8529a4e3e17fdb823e1b7366c4c","t":1}`,
	`{"trace":"0f3da8529a4e3e17fdb823e1b7366c4c","t":1,"spans":[]}`,
	`{"trace":"zz3da8529a4e3e17fdb823e1b7366c4c","t":1,"spans":[{"span":"aaaaaaaaaaaaaaaa","t0":1,"t1":2}]}`,
	`[1,2]`,
	`{"trace":"0f3da8529a4e3e17fdb823e1b7366c4c","t":1,"spans":[{"span":"aaaaaaaaaaaaaaaa","t0":1,"t1":2}`,
}

// TestEngineLineAgreesWithEncodingJSON: the in-place reader reads every record as encoding/json does.
func TestEngineLineAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range engineLineCases {
		checkEngineLine(t, []byte(c))
	}
}

func FuzzEngineLineAgreesWithEncodingJSON(f *testing.F) {
	for _, c := range engineLineCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkEngineLine(t, line) })
}

func checkEngineLine(t *testing.T, line []byte) {
	t.Helper()
	r := newEngineTraceReader(t.TempDir())
	th := &traceHour{byTrace: map[traceID][]engSpan{}}
	got := r.engineLine(th, line)
	for _, k := range foldedKey.FindAll(line, -1) {
		if !bytes.Equal(k, bytes.ToLower(k)) {
			return // encoding/json matches keys in any case; the files' keys are lower case, and so is the reader
		}
	}
	var ref interner
	ref.init()
	want, wantRID, wantOK := engineLineJSON(t, &ref, line)
	if !wantOK {
		if got && json.Valid(line) {
			t.Fatalf("%s: read, encoding/json refuses it", line)
		}
		return // a line encoding/json cannot read: refused or read leniently, never a crash
	}
	if !got {
		t.Fatalf("%s: refused, encoding/json reads it", line)
	}
	for tid, spans := range want {
		gs := th.byTrace[tid]
		if len(gs) != len(spans) {
			t.Fatalf("%s: %d spans, want %d", line, len(gs), len(spans))
		}
		for i := range spans {
			g, w := gs[i], spans[i]
			gn, wn := r.names.str(g.name), ref.str(w.name)
			gl, wl := r.names.str(g.label), ref.str(w.label)
			g.name, w.name, g.label, w.label = 0, 0, 0, 0
			if g != w || gn != wn || gl != wl {
				t.Fatalf("%s: span %d = %+v %q %q, want %+v %q %q", line, i, g, gn, gl, w, wn, wl)
			}
		}
	}
	if len(th.byRID) != len(wantRID) {
		t.Fatalf("%s: rids %v, want %v", line, th.byRID, wantRID)
	}
	for rid, tid := range wantRID {
		if th.byRID[rid] != tid {
			t.Fatalf("%s: rid %q not found", line, rid)
		}
	}
}
