package runfiles

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

const reachLine = `{"name":"actor_train","t0":1796155117.093866,"t1":1796155269.165841,"node":"sim-node-43","rank":348,"role":"train","gpus":[4],"uuids":["GPU-7e4f920a"],"step":70,"span":"3dd18df4512abd62","pid":23436}`

// TestParsePhaseLine: the collector's layout is read, optional members and all; anything a reader might read
// differently is refused.
func TestParsePhaseLine(t *testing.T) {
	p, ok := parsePhaseLine([]byte(reachLine))
	want := phaseLine{t0: 1796155117.093866, t1: 1796155269.165841, node: []byte("sim-node-43"), rank: 348, pid: 23436, span: 0x3dd18df4512abd62}
	if !ok || !reflect.DeepEqual(p, want) {
		t.Fatalf("parsed %+v %v, want %+v", p, ok, want)
	}
	for _, good := range []string{
		`{"name":"sleep","t0":5,"t1":null,"node":"n","rank":-1,"role":"rollout","gpus":[],"span":"00000000000000ff"}`,
		`{"name":"fwd","t0":1.5e9,"t1":1.6E9,"node":"n","rank":0,"role":"train","gpus":[0,1],"step":2,"span":"0123456789abcdef","parent":"fedcba9876543210","pid":7}`,
	} {
		if _, ok := parsePhaseLine([]byte(good)); !ok {
			t.Errorf("refused %s", good)
		}
	}
	for _, change := range [][2]string{
		{`"span":"3dd18df4512abd62"`, `"span":"3DD18DF4512ABD62"`}, // upper case: compared as written
		{`"span":"3dd18df4512abd62"`, `"span":"3dd18df4512abd6"`},
		{`"role":"train"`, `"role": "train"`},
		{`"name":"actor_train"`, `"name":"a\"b"`},
		{`"name":"actor_train"`, `"name":""`},
		{`"t0":1796155117.093866`, `"t0":0`},
		{`"t0":1796155117.093866`, `"t0":01796155117`},
		{`"rank":348`, `"rank":348.0`},
		{`"rank":348`, `"rank":1234567890123456`},
		{`"pid":23436}`, `"pid":23436,"pid":1}`},
		{`"pid":23436}`, `"pid":23436} `},
		{`"gpus":[4]`, `"gpus":[4,]`},
		{`"step":70,`, `"step":{"span":"x"},`},
		{`"node":"sim-node-43"`, "\"node\":\"sim\x01\""},
	} {
		bad := strings.Replace(reachLine, change[0], change[1], 1)
		if bad == reachLine {
			t.Fatalf("%q not in the line", change[0])
		}
		if _, ok := parsePhaseLine([]byte(bad)); ok {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestPhaseReachOf: an hour's reach keeps the markers no closed phase of the hour matched (by node, rank, pid and
// span, not span alone) and the closed phases that started before the hour, in file order, and the other closed
// phases as identities, once each; an hour with a line not in the collector's layout, or with one identity
// closed both before and within the hour, has none; the reach reads back as written.
func TestPhaseReachOf(t *testing.T) {
	const hour = 1796155200.0
	line := func(name, t0, t1, node, rank, span, pid string) string {
		return `{"name":"` + name + `","t0":` + t0 + `,"t1":` + t1 + `,"node":"` + node + `","rank":` + rank +
			`,"role":"train","gpus":[0],"span":"` + span + `","pid":` + pid + "}\n"
	}
	open1 := line("a", "1796155300", "null", "n1", "0", "000000000000000a", "1")
	closed1 := line("a", "1796155300", "1796155400", "n1", "0", "000000000000000a", "1")
	open2 := line("a", "1796155300", "null", "n1", "1", "000000000000000a", "1") // rank 1, same id: not matched
	early := line("b", "1796155100", "1796155500", "n2", "0", "000000000000000b", "2")
	within := line("c", "1796155210", "1796155290", "n2", "0", "000000000000000c", "2")
	filler := strings.Repeat(line("d", "1796155210", "1796155290", "n3", "0", "000000000000000d", "3"), 8)
	text := open1 + open2 + early + closed1 + within + within + filler
	reach, ok, err := PhaseReachOf(strings.NewReader(text), int64(len(text)), hour)
	if err != nil || !ok {
		t.Fatalf("no reach: %v", err)
	}
	if got, want := string(reach.Lines), open2+early; got != want {
		t.Errorf("lines\n%s\nwant\n%s", got, want)
	}
	wantIDs := []PhaseID{{0, 0, 1, 0xa}, {1, 0, 2, 0xc}, {2, 0, 3, 0xd}}
	if !reflect.DeepEqual(reach.IDs, wantIDs) || !reflect.DeepEqual(reach.Nodes, []string{"n1", "n2", "n3"}) || reach.Newest != 1796155400 {
		t.Errorf("ids %+v nodes %v newest %v; want %+v [n1 n2 n3] 1796155400", reach.IDs, reach.Nodes, reach.Newest, wantIDs)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	data := enc.EncodeAll([]byte(text), nil)
	z := AppendSpan(AppendPhaseReach(append([]byte(nil), data...), enc, int64(len(data)), reach), 1, 2)
	back, err := ReadPhaseReach(bytes.NewReader(z), int64(len(z)))
	if err != nil || !reflect.DeepEqual(back, reach) {
		t.Fatalf("read back %+v %v, want %+v", back, err, reach)
	}
	// Not where it says it starts (a frame moved, or data before it it does not stand for): none.
	z = AppendPhaseReach(append([]byte(nil), data...), enc, int64(len(data))-1, reach)
	if _, err := ReadPhaseReach(bytes.NewReader(z), int64(len(z))); err == nil {
		t.Error("a reach not at the end of the data it covers read back")
	}
	for what, text := range map[string]string{
		"a line in another layout":          text + strings.Replace(within, `"pid":2`, `"pid": 2`, 1),
		"closed before and within the hour": text + strings.Replace(within, "1796155210", "1796155190", 1),
		"a reach over half the hour":        open2 + early + within,
	} {
		if _, ok, err := PhaseReachOf(strings.NewReader(text), int64(len(text)), hour); ok || err != nil {
			t.Errorf("%s: a reach (%v)", what, err)
		}
	}
}

// FuzzPhaseReach: any bytes at the end of a compressed partition read as a reach or none, never a panic, and a
// reach read back holds ids that point at its nodes and whole lines.
func FuzzPhaseReach(f *testing.F) {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	f.Add(AppendPhaseReach([]byte("data"), enc, 4, PhaseReach{Lines: []byte(reachLine + "\n"), Nodes: []string{"n"}, IDs: []PhaseID{{0, 1, 2, 3}}, Newest: 5}))
	f.Add(AppendSpan(AppendPhaseReach(nil, enc, 0, PhaseReach{}), 1, 2))
	f.Fuzz(func(t *testing.T, z []byte) {
		r, err := ReadPhaseReach(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			return
		}
		for _, id := range r.IDs {
			if id.Node < 0 || id.Node >= len(r.Nodes) {
				t.Fatalf("id %+v of %d nodes", id, len(r.Nodes))
			}
		}
		if len(r.Lines) > 0 && r.Lines[len(r.Lines)-1] != '\n' {
			t.Fatal("lines end inside a line")
		}
	})
}

// TestHourKeysOf: a trajectories hour's keys hold the lines every reader keeps (no trace id at their start, a
// weight update, a step consume), the other lines' traces by their last 8 bytes and their samples as ranges (a
// number after any `sample":`, as the dashboard reads it), and read back as written.
func TestHourKeysOf(t *testing.T) {
	id := func(n int) string { return fmt.Sprintf("%032x", n) }
	bundle := func(trace int, extra, typ string) string {
		return `{"trace":"` + id(trace) + `","t":1796155300` + extra + `,"spans":[{"type":"` + typ + `","t0":0,"t1":1,"span":"00000000000000aa"}]}` + "\n"
	}
	always := bundle(9, "", "weight_update") + bundle(10, "", "step_consume") +
		`{"trace": "` + id(11) + `","t":1796155300,"sample":7,"spans":[]}` + "\n"
	text := bundle(1, `,"sample":5`, "generate") + always + bundle(2, `,"sample":6`, "attempt") +
		bundle(3, `,"sample":"9"`, "queue") + bundle(4, `,"sub_sample":40`, "queue") + bundle(5, `,"sample":99999999999`, "queue") +
		strings.Repeat(bundle(1, `,"sample":5`, "generate"), 4)
	k, ok, err := HourKeysOf(strings.NewReader(text), int64(len(text)))
	if err != nil || !ok {
		t.Fatalf("no keys: %v", err)
	}
	if string(k.Lines) != always {
		t.Errorf("lines\n%s\nwant\n%s", k.Lines, always)
	}
	if want := []uint64{1, 2, 3, 4, 5}; !reflect.DeepEqual(k.Traces, want) {
		t.Errorf("traces %v, want %v", k.Traces, want)
	}
	if want := [][2]int32{{5, 6}, {9, 9}, {40, 40}}; !reflect.DeepEqual(k.Samples, want) {
		t.Errorf("samples %v, want %v", k.Samples, want)
	}
	var tr [16]byte
	tr[15] = 4
	if !k.HasTrace(tr) || !k.HasSample(6) || !k.HasSample(9) || k.HasSample(7) || k.HasSample(8) || k.HasSample(41) {
		t.Error("HasTrace/HasSample disagree with the keys")
	}
	tr[15] = 9
	if k.HasTrace(tr) {
		t.Error("a weight update's trace is among the keyed traces")
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	data := enc.EncodeAll([]byte(text), nil)
	z := AppendSpan(AppendHourKeys(append([]byte(nil), data...), enc, int64(len(data)), k), 1, 2)
	back, err := ReadHourKeys(bytes.NewReader(z), int64(len(z)))
	if err != nil || !reflect.DeepEqual(back, k) {
		t.Fatalf("read back %+v %v, want %+v", back, err, k)
	}
	if _, err := ReadPhaseReach(bytes.NewReader(z), int64(len(z))); err == nil {
		t.Error("keys read as a phases reach")
	}
	if _, ok, _ := HourKeysOf(strings.NewReader(always), int64(len(always))); ok {
		t.Error("keys of an hour of lines every reader keeps")
	}
}

// FuzzHourKeys: any bytes at the end of a compressed partition read as keys or none, never a panic; keys read
// back are ascending.
func FuzzHourKeys(f *testing.F) {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	f.Add(AppendHourKeys([]byte("data"), enc, 4, HourKeys{Lines: []byte("x\n"), Traces: []uint64{1, 5}, Samples: [][2]int32{{1, 3}, {7, 7}}}))
	f.Add(AppendSpan(AppendHourKeys(nil, enc, 0, HourKeys{}), 1, 2))
	f.Fuzz(func(t *testing.T, z []byte) {
		k, err := ReadHourKeys(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			return
		}
		if !slices.IsSorted(k.Traces) {
			t.Fatal("traces not ascending")
		}
		for i, s := range k.Samples {
			if s[0] > s[1] || i > 0 && s[0] <= k.Samples[i-1][1]+1 {
				t.Fatalf("sample ranges %v", k.Samples)
			}
		}
	})
}
