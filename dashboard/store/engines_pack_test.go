package store

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// TestPackColumnExact: every value comes back bit for bit, whatever it is, in plain and bucket (strided) order.
func TestPackColumnExact(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	nan2 := math.Float64frombits(0x7ff8000000000001) // a NaN with another payload
	cols := map[string][]float64{
		"specials":  {math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, nan2, 1, math.NaN(), -1},
		"huge":      {1 << 53, 1<<53 + 2, 1<<53 - 1, 1e18, 1e18 + 4096, math.MaxFloat64, -math.MaxFloat64, 5e-324, math.SmallestNonzeroFloat64 * 3, 1e300},
		"negative":  {-5, -4.5, -1e9, -0.001, -123456.789},
		"resets":    {0, 100, 200, 300, 0, 50, 100, 0, 0, 1e12, 3},
		"identical": {0.6, 0.6, 0.6, 0.6, 0.6, 0.6},
		"decimals":  {0.1, 0.12, 0.123, 0.1234, 0.12345, 0.123456, 0.1234567, 0.30000000000000004, 1.7976931348623157e308},
	}
	var rnd, ts, gauge, mixed []float64
	for i := range 1000 {
		rnd = append(rnd, r.NormFloat64()*math.Pow(10, float64(r.IntN(30)-15)))
		ts = append(ts, 1_797_120_000+float64(i)*2+float64(r.IntN(5000))/1e6)
		gauge = append(gauge, math.Round(r.Float64()*1e4)/1e4)
		switch r.IntN(5) {
		case 0:
			mixed = append(mixed, math.NaN())
		case 1:
			mixed = append(mixed, r.Float64())
		default:
			mixed = append(mixed, float64(r.IntN(100)))
		}
	}
	cols["random"], cols["ts_us"], cols["gauge_4dp"], cols["mixed"] = rnd, ts, gauge, mixed
	var sc packScratch
	for name, col := range cols {
		for _, stride := range []int{1, 3} {
			vals := col[:len(col)/stride*stride]
			enc := packColumn(vals, stride, &sc)
			var got []float64
			if stride == 1 {
				got = unpackColumn(nil, enc, len(vals))
			} else {
				got, _ = unpackStrided(nil, enc, len(vals)/stride, stride, nil)
			}
			if len(got) != len(vals) {
				t.Fatalf("%s stride %d: %d values back, want %d", name, stride, len(got), len(vals))
			}
			for i := range vals {
				if math.Float64bits(got[i]) != math.Float64bits(vals[i]) {
					t.Fatalf("%s stride %d [%d]: %v (%#x) back, want %v (%#x)", name, stride, i, got[i], math.Float64bits(got[i]), vals[i], math.Float64bits(vals[i]))
				}
			}
			if stride == 1 {
				t.Logf("%-10s %5.2f B/value (mode %d, k %d)", name, float64(len(enc))/float64(len(vals)), enc[0], enc[1])
			}
		}
	}
	// The columns engines produce are small: a steady counter, a µs timestamp, a 4-decimal gauge.
	var counter []float64
	for i := range 1800 {
		counter = append(counter, float64(i*37+r.IntN(20)))
	}
	for name, c := range map[string]struct {
		col []float64
		max float64
	}{"counter": {counter, 2}, "ts_us": {ts, 3}, "gauge_4dp": {gauge, 3}, "identical": {cols["identical"], 1.5}} {
		if per := float64(len(packColumn(c.col, 1, &sc))) / float64(len(c.col)); per > c.max {
			t.Errorf("%s: %.2f B/value packed, want ≤ %v", name, per, c.max)
		}
	}
}

func engHourRel(h int) string {
	return "dashboard/engine_series/" + runfiles.HourName(time.Unix(int64(h0)+int64(h)*3600, 0).UTC()) + ".jsonl"
}

// packRun writes 4 hours of engine series: 3 engines (one with two dp ranks) every 2 s with ms / µs / 7-digit
// timestamps, integer, 4-decimal and full-precision gauges, counters with resets and beyond 2^53, NaN, ±Inf and
// -0, and a histogram with +Inf bucket bounds. Hour 1 is compacted (.zst); hour 0 holds an out-of-order record.
func packRun(t *testing.T) string {
	dir := v2Run(t)
	r := rand.New(rand.NewPCG(3, 3))
	cnt := map[string]float64{}
	for h := range 4 {
		var b strings.Builder
		for i := 0; i < 1800; i += 1 + r.IntN(2) {
			for e, tsFmt := range []string{"%.3f", "%.6f", "%.7f"} {
				ts := h0 + float64(h)*3600 + float64(i)*2 + r.Float64()*0.01
				addr := fmt.Sprintf("http://e%d:1", e)
				ranks := 1
				if e == 0 {
					ranks = 2
				}
				for dp := 0; dp < ranks; dp++ {
					key := fmt.Sprint(e, dp)
					cnt[key] += float64(r.IntN(50))
					if r.IntN(500) == 0 {
						cnt[key] = 0 // engine restart
					}
					odd := []string{"NaN", "Infinity", "-Inf", "-0.0", "0"}[r.IntN(5)]
					if r.IntN(4) != 0 {
						odd = strconv.Itoa(r.IntN(3))
					}
					fmt.Fprintf(&b, `{"ts":`+tsFmt+`,"addr":%q,"labels":{"dp_rank":"%d","engine_type":"unified"},"m":{"sglang:num_running_reqs":%d,"sglang:token_usage":%.4f,"sglang:cache_hit_rate":%v,"sglang:num_requests_total":%g,"sglang:prompt_tokens_total":%.0f,"sglang:odd":%s,"sglang:neg":%g},"h":{"sglang:inter_token_latency_seconds":{"count":%g,"sum":%v,"bounds":[0.005,0.01,0.02,"+Inf"],"counts":[%g,%g,%g,%g,%g]}}}`+"\n",
						ts, addr, dp, r.IntN(64), r.Float64(), r.Float64(), cnt[key], 1e18+cnt[key]*1000, odd, -r.Float64()*1e6,
						cnt[key]*2, cnt[key]*0.0173*r.Float64(), cnt[key]/4, cnt[key]/2, cnt[key], cnt[key]*1.5, cnt[key]*2)
				}
			}
		}
		if h == 0 { // a late record, out of order
			b.WriteString(engLine(h0+1000.5, "http://e1:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 99))
		}
		write(t, dir, engHourRel(h), b.String())
	}
	compact(t, dir, engHourRel(1))
	return dir
}

func compact(t *testing.T, dir, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	write(t, dir, rel+".zst", string(enc.EncodeAll(b, nil)))
	enc.Close()
	os.Remove(filepath.Join(dir, rel))
}

// openEngines opens the run with engine hours packed or not, every hour loaded.
func openEngines(t *testing.T, dir string, pack bool) *Store {
	t.Helper()
	var opts []storeOption
	if !pack {
		opts = append(opts, withEngPackOff())
	}
	st, err := open(dir, false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	st.EngineMetrics()
	return st
}

// packedSeries counts the series held packed and as float64 columns.
func packedSeries(st *Store) (packed, raw int) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, b := range st.engines.blocks {
		for _, ser := range b.series {
			if ser.packed != nil {
				packed++
			} else {
				raw++
			}
		}
	}
	return packed, raw
}

// engineDump is everything the engine readers answer, with floats as bits (NaN compared exactly).
func engineDump(t *testing.T, st *Store) string {
	t.Helper()
	var b strings.Builder
	cat := st.EngineMetrics()
	fmt.Fprintf(&b, "%+v\n", cat)
	windows := [][2]float64{
		{math.Inf(-1), math.Inf(1)},
		{h0 + 100, h0 + 900},
		{h0 + 3000, h0 + 2*3600 + 50},
		{h0 + 3600, h0 + 7200},
		{h0 + 9000.001, h0 + 9000.002},
		{h0 - 5000, h0 - 1},
		{h0 + 1000.5, h0 + 1000.5},
		{h0 + 3*3600 + 10, h0 + 5*3600},
	}
	for _, m := range cat {
		for _, w := range windows {
			for _, r := range st.EngineRawSeries(m.Name, w[0], w[1]) {
				fmt.Fprintf(&b, "%s %v %s %v %s %s %v %v ts=%s v=%s sum=%s bk=%s\n", m.Name, w, r.Addr, r.Labels, r.DP, r.Group, r.Hist, r.Bounds,
					floatBits(r.TS), floatBits(r.V), floatBits(r.Sum), floatBits(r.Buckets))
			}
		}
		for _, stat := range append(EngineStats(m.Kind), "") {
			for _, perDP := range []bool{false, true} {
				res, err := st.EngineSeries(m.Name, stat, perDP, h0+500, h0+4*3600, 300)
				if err != nil {
					t.Fatal(err)
				}
				j, _ := json.Marshal(res)
				b.Write(j)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

func floatBits(fs []float64) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%x,", math.Float64bits(f))
	}
	return b.String()
}

// TestEnginePackedReadsAlike: the same run read with closed hours packed and with every hour as float64 columns
// gives identical raw series, charts and catalog; then late records reach a packed plain hour and a packed
// compacted hour (rewritten with a late frame), and the store still answers exactly what a fresh read does.
func TestEnginePackedReadsAlike(t *testing.T) {
	dir := packRun(t)
	packed := openEngines(t, dir, true)
	if p, r := packedSeries(packed); p == 0 || r == 0 {
		t.Fatalf("%d series packed, %d raw: want both (hours 0, 1 closed; 2 and 3 open)", p, r)
	}
	raw := openEngines(t, dir, false)
	if p, _ := packedSeries(raw); p != 0 {
		t.Fatalf("%d series packed with packing off", p)
	}
	want := engineDump(t, raw)
	if got := engineDump(t, packed); got != want {
		t.Fatalf("packed and raw reads differ:\n%s", firstDiff(got, want))
	}

	// A late record in the packed plain hour 0, one into the compacted hour 1 (rewritten), and a new hour 4:
	// hour 2 closes and is packed, hour 0 is unpacked for the append and packed again.
	appendTo(t, dir, engHourRel(0), engLine(h0+1001.25, "http://e1:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 77)+
		engLine(h0+1001.5, "http://e7:1", "sglang:token_usage", "", 0.5))
	zst := filepath.Join(dir, engHourRel(1)+".zst")
	zb, _ := os.ReadFile(zst)
	dec, _ := zstd.NewReader(nil)
	plain, err := dec.DecodeAll(zb, nil)
	dec.Close()
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, filepath.Join(dir, engHourRel(1)), append(plain, engLine(h0+3600+3.5, "http://e2:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 5)...))
	compact(t, dir, engHourRel(1))
	write(t, dir, engHourRel(4), engLine(h0+4*3600+2, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 1))
	packed.Refresh()
	packed.EngineMetrics()
	after := openEngines(t, dir, false)
	want2 := engineDump(t, after)
	if want2 == want {
		t.Fatal("the late records changed nothing: the test does not test them")
	}
	if got := engineDump(t, packed); got != want2 {
		t.Fatalf("after late records, the packed store differs from a fresh read:\n%s", firstDiff(got, want2))
	}
	packed.mu.RLock()
	for h, b := range packed.engines.blocks {
		if h == int64(h0/3600) || h == int64(h0/3600)+1 || h == int64(h0/3600)+2 {
			for _, ser := range b.series {
				if ser.packed == nil {
					t.Errorf("hour %d: series %s %s not packed again", h-int64(h0/3600), ser.addr, ser.metric)
					break
				}
			}
		}
	}
	packed.mu.RUnlock()
	if got := engineDump(t, openEngines(t, dir, true)); got != want2 {
		t.Fatalf("a fresh packed read differs:\n%s", firstDiff(got, want2))
	}

	// The collector compacts hour 3 (now the newest but one, tailed as plain text): it is read again from the
	// .zst and packed.
	isPacked := func(h int64) bool {
		packed.mu.RLock()
		defer packed.mu.RUnlock()
		for _, ser := range packed.engines.blocks[int64(h0/3600)+h].series {
			if ser.packed == nil {
				return false
			}
		}
		return true
	}
	if isPacked(3) {
		t.Fatal("hour 3 packed while its plain file may still grow")
	}
	compact(t, dir, engHourRel(3))
	packed.Refresh()
	if !isPacked(3) {
		t.Fatal("hour 3 not packed once compacted")
	}
	if got := engineDump(t, packed); got != want2 {
		t.Fatalf("after compaction of hour 3:\n%s", firstDiff(got, want2))
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			cut := func(s string) string {
				if len(s) > 600 {
					return s[:600] + "…"
				}
				return s
			}
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i, cut(la[i]), cut(lb[i]))
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(la), len(lb))
}

// TestEngineBytesPerPoint: one hour of 4 engines × 17 series scraped every 2 s (values as sglang exports them,
// µs timestamps, 11-bucket histograms) holds several times less packed than as float64 columns, and reads back
// the same.
func TestEngineBytesPerPoint(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	b := newEngBlock()
	var c [4][6]float64
	var hs [4][3][13]float64
	bounds := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	var line strings.Builder
	for i := range 1800 {
		for e := range 4 {
			line.Reset()
			fmt.Fprintf(&line, `{"ts":%.6f,"addr":"http://e%d:1","labels":{"dp_rank":"0"},"m":{"sglang:num_running_reqs":%d,"sglang:num_queue_reqs":%d,"sglang:num_used_tokens":%d,"sglang:token_usage":%.2f,"sglang:cache_hit_rate":%v,"sglang:gen_throughput":%v,"sglang:spec_accept_length":%.4f,"sglang:num_grammar_queue_reqs":0`,
				h0+float64(i)*2+r.Float64()*0.05, e, 40+r.IntN(24), r.IntN(5), 100000+r.IntN(50000), r.Float64(), r.Float64(), 1500+r.Float64()*1000, 1+r.Float64())
			for k := range c[e] {
				c[e][k] += float64(r.IntN([]int{20000, 4000, 30, 2, 10000, 1}[k]))
				fmt.Fprintf(&line, `,"sglang:c%d_total":%.0f`, k, c[e][k])
			}
			line.WriteString(`},"h":{`)
			for k := range hs[e] {
				hh := &hs[e][k]
				obs := r.IntN(50)
				for range obs {
					lat := math.Exp(r.NormFloat64() - 3 + float64(k))
					hh[1] += lat
					hh[2+sort.SearchFloat64s(bounds, lat)]++
				}
				hh[0] += float64(obs)
				if k > 0 {
					line.WriteByte(',')
				}
				fmt.Fprintf(&line, `"sglang:h%d":{"count":%.0f,"sum":%v,"bounds":[0.001,0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5],"counts":[`, k, hh[0], hh[1])
				for q := range 11 {
					if q > 0 {
						line.WriteByte(',')
					}
					fmt.Fprintf(&line, "%.0f", hh[2+q])
				}
				line.WriteString("]}")
			}
			line.WriteString("}}")
			if !b.addLine([]byte(line.String())) {
				t.Fatalf("rejected: %s", line.String())
			}
		}
	}
	if b.points != 1800*4*17 {
		t.Fatalf("%d points", b.points)
	}
	// The float64 columns trimmed to their length (what the store held at best before packing).
	rawBytes := 0
	cols := map[*engSeries][4][]float64{}
	for _, ser := range b.series {
		rawBytes += 8 * (len(ser.ts) + len(ser.v) + len(ser.sum) + len(ser.buckets))
		cols[ser] = [4][]float64{ser.ts, ser.v, ser.sum, ser.buckets}
	}
	b.seal()
	packed := b.memBytes()
	t.Logf("%.2f B per point as float64 columns, %.2f B packed (%d points)", float64(rawBytes)/float64(b.points), float64(packed)/float64(b.points), b.points)
	if packed*4 > rawBytes {
		t.Fatalf("packed %d B vs %d B raw: less than 4× smaller", packed, rawBytes)
	}
	for ser, want := range cols {
		if ser.packed == nil {
			t.Fatal("a series was not packed")
		}
		ser.unpack()
		for i, got := range [4][]float64{ser.ts, ser.v, ser.sum, ser.buckets} {
			if floatBits(got) != floatBits(want[i]) {
				t.Fatalf("%s %s column %d differs after unpacking", ser.addr, ser.metric, i)
			}
		}
	}
}
