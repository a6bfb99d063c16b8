package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// traceCounts is what a trace holds, as read back here and by scripts/check-perfetto-trace.py.
type traceCounts struct {
	Packets, Tracks, CounterTracks, Slices, Instants, Counters int
	UnknownTrackRefs, NestingErrors, OpenAtEnd, MaxDepth       int
	SliceNames                                                 map[string]int
	TrackNames                                                 []string
	Metadata                                                   map[string]int64 // the integer metadata entries
}

// readTrace decodes a trace with protowire alone: the fields export.go writes, checked for framing.
func readTrace(t *testing.T, b []byte) traceCounts {
	t.Helper()
	c := traceCounts{SliceNames: map[string]int{}, Metadata: map[string]int64{}}
	fields := func(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64)) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("bad tag: %v", protowire.ParseError(n))
			}
			b = b[n:]
			switch typ {
			case protowire.VarintType:
				v, m := protowire.ConsumeVarint(b)
				if m < 0 {
					t.Fatal("bad varint")
				}
				f(num, typ, nil, v)
				b = b[m:]
			case protowire.BytesType:
				v, m := protowire.ConsumeBytes(b)
				if m < 0 {
					t.Fatal("bad bytes")
				}
				f(num, typ, v, 0)
				b = b[m:]
			case protowire.Fixed64Type:
				v, m := protowire.ConsumeFixed64(b)
				if m < 0 {
					t.Fatal("bad fixed64")
				}
				f(num, typ, nil, v)
				b = b[m:]
			default:
				t.Fatalf("unexpected wire type %v", typ)
			}
		}
	}
	tracks, counters := map[uint64]bool{}, map[uint64]bool{}
	type ev struct {
		typ, track, ts uint64
		name           string
	}
	var evs []ev
	fields(b, func(num protowire.Number, _ protowire.Type, pkt []byte, _ uint64) {
		if num != fTracePacket {
			t.Fatalf("top-level field %d", num)
		}
		c.Packets++
		var ts uint64
		fields(pkt, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) {
			switch num {
			case fPacketTimestamp:
				ts = x
			case fPacketChromeEvents:
				fields(v, func(num protowire.Number, _ protowire.Type, m []byte, _ uint64) {
					if num != fBundleMetadata {
						return
					}
					var name string
					var val int64
					fields(m, func(num protowire.Number, _ protowire.Type, s []byte, x uint64) {
						switch num {
						case fMetadataName:
							name = string(s)
						case fMetadataInt: // an int64's two's complement bits
							val = int64(x & math.MaxInt64)
							if x>>63 == 1 {
								val += math.MinInt64
							}
						}
					})
					c.Metadata[name] = val
				})
			case fPacketTrackDesc:
				var id uint64
				isCounter := false
				fields(v, func(num protowire.Number, _ protowire.Type, s []byte, x uint64) {
					switch num {
					case fTrackUUID:
						id = x
					case fTrackName:
						c.TrackNames = append(c.TrackNames, string(s))
					}
					isCounter = isCounter || num == fTrackCounter
				})
				tracks[id] = true
				if isCounter {
					counters[id] = true
				}
			case fPacketTrackEvent:
				e := ev{ts: ts}
				fields(v, func(num protowire.Number, _ protowire.Type, s []byte, x uint64) {
					switch num {
					case fEventType:
						e.typ = x
					case fEventTrack:
						e.track = x
					case fEventName:
						e.name = string(s)
					}
				})
				evs = append(evs, e)
			}
		})
	})
	c.Tracks, c.CounterTracks = len(tracks), len(counters)
	stacks := map[uint64][]uint64{}
	for _, e := range evs {
		if !tracks[e.track] {
			c.UnknownTrackRefs++
		}
		st := stacks[e.track]
		switch e.typ {
		case eventSliceBegin:
			c.Slices++
			c.SliceNames[e.name]++
			st = append(st, e.ts)
			c.MaxDepth = max(c.MaxDepth, len(st))
		case eventSliceEnd:
			if len(st) == 0 || e.ts < st[len(st)-1] {
				c.NestingErrors++
			} else {
				st = st[:len(st)-1]
			}
		case eventInstant:
			c.Instants++
		case eventCounter:
			c.Counters++
		}
		stacks[e.track] = st
	}
	for _, st := range stacks {
		c.OpenAtEnd += len(st)
	}
	return c
}

// perfettoPython is python/.venv's Python (made by `make -C python venv` from python/requirements-test.txt) when
// it imports Perfetto's protos; "" otherwise.
func perfettoPython() string {
	const py = "../../python/.venv/bin/python"
	if exec.Command(py, "-c", "import perfetto.protos.perfetto.trace.perfetto_trace_pb2").Run() != nil {
		return ""
	}
	return py
}

// TestPerfettoExport: the export of a window holds a track per node and lane, every phase of the window as a
// slice (nesting kept), util and memory counters per lane, the engine overlay, the window's sample segments
// and the steps as instants; read back here and by Perfetto's own protos.
func TestPerfettoExport(t *testing.T) {
	dir := handRun(t, healthySpec)
	// GPU readings every 10 s on the 8 lanes, in their hour partitions.
	for h := range 4 {
		var lines []byte
		for ts := rb0 + float64(h)*3600; ts < rb0+float64(h+1)*3600; ts += 10 {
			for g := range 8 {
				lines = fmt.Appendf(lines, `{"ts":%.0f,"node":"n0","gpu":%d,"util":%d,"mem_mb":%d}`+"\n", ts, g, int(ts)%100, 1000+g)
			}
		}
		writeFile(t, filepath.Join(dir, "dashboard/gpu_util", runfilesHour(rb0+float64(h)*3600)+".jsonl"), string(lines), false)
	}
	ts, _, _ := serve(t, dir, Options{})
	t0, t1 := rb0-10, rb0+4*3600-20
	q := fmt.Sprintf("?t0=%.0f&t1=%.0f&points=200", t0, t1)
	resp, err := http.Get(ts.URL + "/api/v1/export/perfetto" + q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Disposition") == "" {
		t.Fatalf("export: %d %s %.300s", resp.StatusCode, resp.Header, b)
	}
	// What the API says the window holds.
	_, ph := getData(t, ts.URL+"/api/v1/phases"+q)
	phases := 0
	for _, l := range ph["lanes"].([]any) {
		phases += len(l.(map[string]any)["t0"].([]any))
	}
	// No step records carry perf/step_time here (/bubbles is empty): the steps are those of the phases.
	_, bub := getData(t, ts.URL+fmt.Sprintf("/api/v1/bubbles?t0=%.0f&t1=%.0f", t0, t1))
	stepSet := map[float64]bool{}
	for _, l := range ph["lanes"].([]any) {
		for _, s := range l.(map[string]any)["step"].([]any) {
			if s.(float64) >= 0 {
				stepSet[s.(float64)] = true
			}
		}
	}
	steps := len(stepSet)
	_, an := getData(t, ts.URL+"/api/v1/steps/7/anatomy")
	segments := 0
	for _, r := range an["rows"].([]any) {
		row := r.(map[string]any)
		segments += len(row["attempts"].([]any))/2 + len(row["queue"].([]any))/2 + len(row["gen"].([]any))/5 + len(row["tool"].([]any))/3
	}
	c := readTrace(t, b)
	if phases != 8*4*3+4+4 || steps != 9 || len(bub["steps"].([]any)) != 0 || segments != 4*5 {
		t.Fatalf("the fixture changed: %d phases, %d steps, %d segments, bubbles %v", phases, steps, segments, bub)
	}
	if c.Slices != phases+segments || c.Instants != steps || c.NestingErrors != 0 || c.OpenAtEnd != 0 || c.UnknownTrackRefs != 0 {
		t.Errorf("trace %+v: want %d slices (%d phases + %d segments), %d instants, nested", c, phases+segments, phases, segments, steps)
	}
	if c.SliceNames["actor_train"] != 8*4 || c.SliceNames["generate"] != 8 || c.SliceNames["attempt"] != 4 {
		t.Errorf("slice names %v", c.SliceNames)
	}
	// Tracks: 1 node + 8 lanes + 2 GPU counters (util, mem) per lane + the overlay's engine counters (one per
	// engine segment on a lane, of each metric the run has) + trajectories root + 4 samples + steps.
	overlay := 0
	for _, m := range exportEngineMetrics {
		if code, o := getData(t, ts.URL+"/api/v1/engines"+q+"&metric="+m); code == 200 {
			for _, l := range o["lanes"].([]any) {
				overlay += len(l.(map[string]any)["segments"].([]any))
			}
		}
	}
	if overlay != 4 {
		t.Fatalf("the fixture changed: %d overlay segments", overlay)
	}
	wantCounterTracks := 8*2 + overlay
	if c.CounterTracks != wantCounterTracks || c.Tracks != 1+8+wantCounterTracks+1+4+1 {
		t.Errorf("%d tracks, %d counter tracks; want %d and %d", c.Tracks, c.CounterTracks, 1+8+wantCounterTracks+1+4+1, wantCounterTracks)
	}
	if c.MaxDepth < 2 {
		t.Errorf("no nesting kept (depth %d): attempts hold their segments", c.MaxDepth)
	}
	if got, _ := strconv.Atoi(resp.Header.Get("X-Miles-Trace-Slices")); got != c.Slices {
		t.Errorf("X-Miles-Trace-Slices %d, trace %d", got, c.Slices)
	}
	// Lane tracks are named as the Compute view labels its lanes (the lane ids of /lanes), in its order.
	_, lanes := getData(t, ts.URL+"/api/v1/lanes")
	var laneTracks []string
	for _, n := range c.TrackNames {
		if strings.HasPrefix(n, "g") && strings.Contains(n, " · n0:") {
			laneTracks = append(laneTracks, strings.SplitN(n, " · ", 2)[0])
		}
	}
	var laneIDs []string
	for _, l := range lanes["lanes"].([]any) {
		laneIDs = append(laneIDs, l.(map[string]any)["id"].(string))
	}
	if strings.Join(laneTracks, ",") != strings.Join(laneIDs, ",") || len(laneIDs) != 8 {
		t.Errorf("lane tracks %v, the API's lanes %v (tracks %q)", laneTracks, laneIDs, c.TrackNames)
	}
	// Every sample of the window fits: the trace says it did not cap.
	if m := c.Metadata; m["miles_trajectories_capped"] != 0 || m["miles_trajectories_exported"] != 4 || m["miles_trajectories_in_window"] != 4 ||
		resp.Header.Get("X-Miles-Trace-Capped") != "" || resp.Header.Get("X-Miles-Trace-Samples") != "4" {
		t.Errorf("metadata %v, headers %v: want 4 of 4 samples, not capped", m, resp.Header)
	}

	// Perfetto's own protos read the same.
	py := perfettoPython()
	if py == "" {
		if os.Getenv("MILES_E2E_REQUIRE") == "1" {
			t.Fatal("no Python with PyPI perfetto: make -C python venv")
		}
		t.Skip("no Python with PyPI perfetto (make -C python venv): checked with protowire only")
	}
	path := filepath.Join(t.TempDir(), "w.perfetto-trace")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "../../scripts/check-perfetto-trace.py", path).Output()
	if err != nil {
		t.Fatalf("perfetto check: %v %s", err, out)
	}
	var pc struct {
		Metadata         map[string]any `json:"metadata"`
		TrackNames       []string       `json:"track_names"`
		Tracks           int            `json:"tracks"`
		CounterTracks    int            `json:"counter_tracks"`
		Slices           int            `json:"slices"`
		Instants         int            `json:"instants"`
		Counters         int            `json:"counters"`
		UnknownTrackRefs int            `json:"unknown_track_refs"`
		NestingErrors    int            `json:"nesting_errors"`
		OpenAtEnd        int            `json:"open_at_end"`
		SliceNames       map[string]int `json:"slice_names"`
	}
	if err := json.Unmarshal(out, &pc); err != nil {
		t.Fatal(err)
	}
	if pc.Tracks != c.Tracks || pc.CounterTracks != c.CounterTracks || pc.Slices != c.Slices || pc.Instants != c.Instants ||
		pc.Counters != c.Counters || pc.UnknownTrackRefs != 0 || pc.NestingErrors != 0 || pc.OpenAtEnd != 0 {
		t.Errorf("Perfetto's protos read %+v; protowire %+v", pc, c)
	}
	if fmt.Sprint(pc.Metadata["miles_trajectories_exported"]) != "4" || strings.Join(pc.TrackNames, "|") != strings.Join(c.TrackNames, "|") {
		t.Errorf("Perfetto's protos read metadata %v, track names %q", pc.Metadata, pc.TrackNames)
	}
}

// TestPerfettoExportCapsToNewestSteps: a window holding more samples than an export keeps exports those of its
// newest steps, and says so (metadata, the trajectories track's name, the response headers).
func TestPerfettoExportCapsToNewestSteps(t *testing.T) {
	dir := handRun(t, healthySpec) // step 7 consumes samples 100–103
	// Step 6 consumes four more, 300 s earlier.
	r := &runBuilder{t: t, dir: dir, parts: map[string]*bytes.Buffer{}}
	var links []string
	for i := range 4 {
		tr := fmt.Sprintf("%032x", 0x61+i)
		links = append(links, `"`+tr+`"`)
		s0 := rb0 + 6*300 - 200 + float64(i)*10
		sample := fmt.Sprintf(`"trace":%q,"sample":%d,"group":1,"attempt":0`, tr, 60+i)
		r.line("trajectories", s0+90, fmt.Sprintf(`{"type":"generate","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"turn":1,"wv":6,"tok_out":500,"finish":"stop"}`, s0, s0+90, 0x600+10*i, sample))
		r.line("trajectories", s0+90, fmt.Sprintf(`{"type":"attempt","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"status":"completed"}`, s0, s0+90, 0x601+10*i, sample))
		r.line("trajectories", rb0+6*300, fmt.Sprintf(`{"type":"consume","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"wv":6,"step":6,"a":{"miles.lifecycle.status":"known","miles.lifecycle.staleness":0,"miles.lifecycle.version.min":6,"miles.lifecycle.version.max":6,"miles.lifecycle.mixed_version":false}}`,
			rb0+6*300, rb0+6*300, 0x602+10*i, sample))
	}
	r.line("trajectories", rb0+6*300, fmt.Sprintf(`{"type":"step_consume","t0":%.0f,"t1":%.0f,"trace":"%032x","span":"00000000000006ff","wv":6,"step":6,"batch":4,"links":[%s],"a":{"miles.lifecycle.status":"known","miles.lifecycle.step.samples":4,"miles.lifecycle.step.known":4}}`,
		rb0+6*300, rb0+6*300+0.05, 0x6ff, strings.Join(links, ",")))
	for name, b := range r.parts {
		writeFile(t, filepath.Join(dir, "dashboard", name+".jsonl"), b.String(), true)
	}

	q := fmt.Sprintf("/api/v1/export/perfetto?t0=%.0f&t1=%.0f&points=50", rb0-10, rb0+9*300)
	for _, tc := range []struct {
		limit, kept, window, first int
		capped                     bool
		names                      string
	}{
		{limit: 0, kept: 8, window: 8, first: 6, names: "step 6 · sample 60,step 6 · sample 61,step 6 · sample 62,step 6 · sample 63,step 7 · sample 100,step 7 · sample 101,step 7 · sample 102,step 7 · sample 103"},
		{limit: 4, kept: 4, window: 8, first: 7, capped: true, names: "step 7 · sample 100,step 7 · sample 101,step 7 · sample 102,step 7 · sample 103"},
		{limit: 5, kept: 5, window: 8, first: 6, capped: true, names: "step 6 · sample 60,step 7 · sample 100,step 7 · sample 101,step 7 · sample 102,step 7 · sample 103"},
	} {
		ts, _, _ := serve(t, dir, Options{ExportMaxSamples: tc.limit})
		resp, err := http.Get(ts.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("limit %d: %d %.300s", tc.limit, resp.StatusCode, b)
		}
		c := readTrace(t, b)
		var samples []string
		root := ""
		for _, n := range c.TrackNames {
			if strings.HasPrefix(n, "step ") && strings.Contains(n, " · sample ") {
				samples = append(samples, n)
			}
			if strings.HasPrefix(n, "trajectories") {
				root = n
			}
		}
		m := c.Metadata
		if got := strings.Join(samples, ","); got != tc.names {
			t.Errorf("limit %d: sample tracks %s, want %s", tc.limit, got, tc.names)
		}
		if m["miles_trajectories_exported"] != int64(tc.kept) || m["miles_trajectories_in_window"] != int64(tc.window) ||
			(m["miles_trajectories_capped"] == 1) != tc.capped || m["miles_trajectories_first_step"] != int64(tc.first) || m["miles_trajectories_last_step"] != 7 {
			t.Errorf("limit %d: metadata %v", tc.limit, m)
		}
		wantRoot := "trajectories"
		if tc.capped {
			wantRoot = fmt.Sprintf("trajectories · newest %d of 8 samples (steps %d-7; an export holds at most %d)", tc.kept, tc.first, tc.limit)
		}
		if root != wantRoot || (resp.Header.Get("X-Miles-Trace-Capped") != "") != tc.capped || resp.Header.Get("X-Miles-Trace-Samples-Window") != "8" {
			t.Errorf("limit %d: trajectories track %q, headers %v", tc.limit, root, resp.Header)
		}
	}
}

func runfilesHour(ts float64) string { return runfiles.HourName(time.Unix(int64(ts), 0)) }

// TestPerfettoExportBounded: a window over the event limit is refused with a message saying what to do; the
// same window with fewer points or lanes fits.
func TestPerfettoExportBounded(t *testing.T) {
	ts, _, _ := serve(t, fixture(t, 16), Options{ExportMaxEvents: 10_000})
	q := fmt.Sprintf("/api/v1/export/perfetto?t0=%.0f&t1=%.0f", h0, h0+600)
	code, m := get(t, ts.URL+q+"&points=1000") // 16 lanes × 2 fields × 1000 points
	if code != 400 || m["errorType"] != "bad_data" || !strings.Contains(fmt.Sprint(m["error"]), "over the export's limit of 10000: narrow the window or the lanes") {
		t.Fatalf("over the limit: %d %v", code, m)
	}
	for _, p := range []string{"&points=200", "&points=1000&lanes=g0-3"} {
		resp, err := http.Get(ts.URL + q + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || readTrace(t, b).Counters == 0 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	if code, m := get(t, ts.URL+"/api/v1/export/perfetto?points=5000"); code != 400 || m["errorType"] != "bad_data" {
		t.Fatalf("points over the cap: %d %v", code, m)
	}
}
