package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// trajLineSeeds are trajectories lines as the collector writes them (the first ones: every record kind of a
// bundle, trajLineFast's to read) and as it does not (the general reader's).
var trajLineSeeds = []string{
	`{"trace":"a5265cd3a76a468f045ef9e95ddd338b","t":1796126158.648074,"sample":251666,"group":31458,"attempt":0,"root":"c39acf0b6a4e5f15","spans":[{"type":"generate","t0":91.397728,"t1":244.44013,"span":"815ef138513d4755","turn":3,"wv":16,"engine":"http://sim-node-68:30000","tok_in":5820,"tok_out":8192,"finish":"length"},{"type":"attempt","t0":0,"t1":244.44013,"span":"c39acf0b6a4e5f15","status":"truncated"}]}`,
	`{"trace":"f01d27da9b787d019bfc549183811d52","t":1796126487.9393,"sample":246746,"group":30843,"attempt":0,"root":"b5a82d7fd2f57070","spans":[{"type":"consume","t0":0,"t1":0.01,"span":"7b39c07056dec847","wv":16,"step":15}]}`,
	`{"trace":"0af7651916cd43dd8448eb211c80319c","t":1796120000.5,"sample":7,"group":1,"attempt":2,"spans":[{"type":"queue","t0":0,"t1":1.25,"span":"00f067aa0ba902b7"},{"type":"tool","t0":2,"t1":3.5,"span":"00f067aa0ba902b8","turn":1,"tool_calls":2,"tools":["python"]}]}`,
	`{"trace":"0af7651916cd43dd8448eb211c80319d","t":1796120000,"spans":[{"type":"weight_update","t0":-3.5,"t1":0,"span":"00f067aa0ba902b9","wv":17}]}`,
	`{"trace":"0af7651916cd43dd8448eb211c80319e","t":1796120001,"sample":8,"spans":[]}`,
	`{"trace":"0af7651916cd43dd8448eb211c80319f","t":1796120002,"sample":9,"spans":[{"type":"generate","t0":1e2,"t1":101.5,"span":"00f067aa0ba902ba","tok_out":12.5,"wv":-4}]}`,
	// The general reader's: a step's consume naming its batch, spaces, escapes, a member after "spans", schema 2.
	`{"trace":"0af7651916cd43dd8448eb211c8031a0","t":1796120003,"spans":[{"type":"step_consume","t0":0,"t1":0.5,"span":"00f067aa0ba902bb","step":4,"batch":2,"links":["0af7651916cd43dd8448eb211c80319c","0af7651916cd43dd8448eb211c80319f"]}]}`,
	`{"trace": "0af7651916cd43dd8448eb211c8031a1", "t": 1796120004, "spans": [{"type": "attempt", "t0": 0, "t1": 2, "span": "00f067aa0ba902bc", "status": "ok"}]}`,
	`{"trace":"0af7651916cd43dd8448eb211c8031a2","t":1796120005,"spans":[{"type":"attempt","t0":0,"t1":2,"span":"00f067aa0ba902bd","status":"a\"b"}]}`,
	`{"trace":"0af7651916cd43dd8448eb211c8031a3","spans":[{"type":"attempt","t0":0,"t1":2,"span":"00f067aa0ba902be"}],"t":1796120006,"sample":3}`,
	`{"trace":"0af7651916cd43dd8448eb211c8031a4","type":"attempt","t0":1796120007,"t1":1796120009.5,"span":"00f067aa0ba902bf","sample":"12","status":"ok"}`,
	`{"trace":"short","t":1796120008,"spans":[{"type":"attempt","t0":0,"t1":2,"span":"00f067aa0ba902c0","a":{"x":1}}]}`,
}

// decodedTraj is what trajLine (or the general reader alone) passes on for a line, the strings resolved.
func decodedTraj(line []byte, general bool) (bool, []string) {
	var in interner
	in.init()
	var out []string
	fn := func(r *trajRec, links []traceID, raw []byte) {
		out = append(out, fmt.Sprintf("%x %x %x %x %d %q %q %q %d %d %d %d %d %d %d %d %d %x %s",
			math.Float64bits(r.t0), math.Float64bits(r.t1), r.trace, r.span, r.typ, in.str(r.status), in.str(r.finish),
			in.str(r.engine), r.sample, r.group, r.attempt, r.turn, r.wv, r.step, r.toolCalls, r.tokIn, r.tokOut, links, raw))
	}
	if general {
		return trajLineGeneral(line, &in, fn), out
	}
	return trajLine(line, &in, fn), out
}

func checkTrajLineAgrees(t *testing.T, line []byte) {
	t.Helper()
	ok, got := decodedTraj(line, false)
	wantOK, want := decodedTraj(line, true)
	if ok != wantOK || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%q:\nread %v %q\nthe general reader %v %q", line, ok, got, wantOK, want)
	}
}

// TestTrajLineFastAgrees: the one-pass reader of the collector's bundles takes every kind of their records, and
// passes on what the general reader passes on for them and for 40 000 lines damaged at random (a byte dropped,
// changed or added, a space, an escape, a member after "spans").
func TestTrajLineFastAgrees(t *testing.T) {
	var in interner
	in.init()
	for i, l := range trajLineSeeds[:6] {
		if _, done := trajLineFast([]byte(l), &in, func(*trajRec, []traceID, []byte) {}); !done {
			t.Fatalf("seed %d is the collector's bundle, read the general way: %s", i, l)
		}
	}
	for _, l := range trajLineSeeds[6:] {
		if _, done := trajLineFast([]byte(l), &in, func(*trajRec, []traceID, []byte) {}); done {
			t.Fatalf("read in one pass: %s", l)
		}
	}
	for _, l := range trajLineSeeds {
		checkTrajLineAgrees(t, []byte(l))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = `{}[]",:\ .-e0123456789abcdefnrtu`
	for range 40000 {
		line := []byte(trajLineSeeds[rng.IntN(len(trajLineSeeds))])
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(line))
			switch rng.IntN(5) {
			case 0:
				line = append(line[:at:at], line[at+1:]...)
			case 1:
				line[at] = alphabet[rng.IntN(len(alphabet))]
			case 2:
				line = append(line[:at:at], append([]byte{alphabet[rng.IntN(len(alphabet))]}, line[at:]...)...)
			case 3:
				line = append(line[:at:at], append([]byte(" "), line[at:]...)...)
			default:
				if k := strings.LastIndexByte(string(line), '}'); k > 0 {
					line = append(line[:k:k], append([]byte(`,"sample":5`), line[k:]...)...)
				}
			}
		}
		checkTrajLineAgrees(t, line)
	}
}

// FuzzTrajLineAgrees: `go test -fuzz FuzzTrajLineAgrees ./dashboard/store/` looks for a line the one-pass reader
// reads otherwise than the general one.
func FuzzTrajLineAgrees(f *testing.F) {
	for _, l := range trajLineSeeds {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkTrajLineAgrees(t, line) })
}

// TestRecordChains: a block's chains give each trace's and each sample's records in reading order, traces whose
// ids share the chain key's bits told apart, and a growing hour's new records chained after the first ones.
func TestRecordChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	traces := make([]traceID, 50)
	for i := range traces {
		traces[i][0], traces[i][15] = byte(i), byte(i*7)
		if i%2 == 0 {
			traces[i][8] = 1 // half the traces share the key's bits
		} else {
			traces[i][8], traces[i][11] = byte(i), byte(i*3)
		}
	}
	var records []trajRec
	add := func(n int) {
		for range n {
			r := newTrajRec()
			r.trace = traces[rng.IntN(len(traces))]
			if rng.IntN(4) > 0 {
				r.sample = int32(rng.IntN(30)) //nolint:gosec // small
			}
			records = append(records, r)
		}
	}
	check := func(c *recChains) {
		t.Helper()
		for _, tr := range traces {
			var want []int32
			for i := range records {
				if records[i].trace == tr {
					want = append(want, int32(i))
				}
			}
			if got := c.ofTrace(tr, nil); !slices.Equal(got, want) {
				t.Fatalf("trace %x: %v, want %v", tr, got, want)
			}
		}
		for s := int32(-1); s < 32; s++ {
			var want []int32
			for i := range records {
				if s >= 0 && records[i].sample == s {
					want = append(want, int32(i))
				}
			}
			if got := c.ofSample(s, nil); !slices.Equal(got, want) {
				t.Fatalf("sample %d: %v, want %v", s, got, want)
			}
		}
	}
	var c recChains
	add(2000)
	c.extend(records)
	check(&c)
	add(700) // the hour grew
	c.extend(records)
	check(&c)
	c.extend(records) // nothing new
	check(&c)
}
