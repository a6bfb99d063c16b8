package store

import (
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// The Python miles dashboard writes every gpu_util reading (docs/semconv.md §8.3) as json.dumps of one dataclass
// with compact separators, so a miles v1 line always has one layout:
//
//	{"ts":1733500000.123456,"node":"node-000","gpu":3,"util":87,"mem_mb":71234,"power_w":512}
//
// A first carpet or fleet of a v1 run reads every such line for util alone (gpuBlock.deferred). v1Reading.scan reads that
// exact layout with fixed separators and no loop over members; any other line (another key order, an extra key,
// white space, an escape, an exponent, a time that is not a plain decimal) is left to scanFast, so a line it
// takes reads exactly as scanFast reads it (the tests hold the two against each other, line by line and block by
// block).

// v1 separators: each member's bytes from the end of the previous value to the start of its own.
const (
	v1Head  = `{"ts":`
	v1Node  = `,"node":"`
	v1GPU   = `","gpu":`
	v1Util  = `,"util":`
	v1Mem   = `,"mem_mb":`
	v1Power = `,"power_w":`
)

// v1Pow10Int are the powers of ten up to the sub-millisecond digits a time may have.
var v1Pow10Int = [...]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// v1MaxSeconds bounds the times whose milliseconds v1Reading.scan takes from the digits (to the year 2096): below
// it the float of a time is off by at most 2.4e-7 s, and its product by 1000 by less than 5e-4 ms in all, well
// inside the 1/(2·v1Tie) ms (0.002 ms) either side of a half within which it leaves the line to the float.
const (
	v1MaxSeconds = 4e9
	v1Tie        = 250
)

// v1Reading is a miles v1 line as v1Reading.scan reads it: offsets into the line and the numbers parsed, nothing
// that points into the line (it lives on the stack of addLine; the records' shared fields would cost a write
// barrier per slice stored).
type v1Reading struct {
	// tsMs is the time in milliseconds, rounded from its digits line[ts0:ts1]; addV1 reads their float only where
	// the time may be the block's oldest or newest.
	tsMs     int64
	ts0, ts1 int
	// node0, node1 delimit the node's name; gpu is the GPU index.
	node0, node1, gpu int
	// util, utilQ, utilExact are util as flatjson.ReadNum reads it (utilQ in hundredths where utilExact).
	util      float64
	utilQ     int64
	utilExact bool
	// mem and power are the offsets of the mem_mb and power_w members' separators (v1Mem, v1Power), memEnd and
	// powerEnd where their raw values end.
	mem, memEnd, power, powerEnd int
}

// scan reads line where it has the miles v1 layout byte for byte, as scanFast reads it with eagerOnly (ts, node,
// gpu and util parsed; mem_mb and power_w skipped raw: plain numbers); false for any other line.
func (x *v1Reading) scan(line []byte) bool {
	n := len(line)
	if n < len(v1Head)+len(v1Node)+len(v1GPU)+len(v1Util)+len(v1Mem)+len(v1Power)+6 || string(line[:len(v1Head)]) != v1Head {
		return false
	}
	// ts: seconds[.digits], no sign, no leading zero, at most 9 decimals: the milliseconds from the digits,
	// rounded half up, as math.Round(ts*1000) rounds the float flatjson.ReadNum reads, wherever the
	// sub-millisecond rest is not within 1/(2·v1Tie) ms of a half.
	i := len(v1Head)
	x.ts0 = i
	var sec int64
	for i < n && line[i]-'0' < 10 && i-x.ts0 < 11 {
		sec = sec*10 + int64(line[i]-'0')
		i++
	}
	if i == x.ts0 || line[x.ts0] == '0' || sec >= v1MaxSeconds {
		return false
	}
	ms := sec * 1000
	if i < n && line[i] == '.' {
		i++
		f0 := i
		var part int64
		for i < n && line[i]-'0' < 10 && i-f0 < 3 {
			part = part*10 + int64(line[i]-'0')
			i++
		}
		if i == f0 {
			return false
		}
		ms += part * v1Pow10Int[3-(i-f0)]
		r0 := i
		var rest int64
		for i < n && line[i]-'0' < 10 && i-r0 < 6 {
			rest = rest*10 + int64(line[i]-'0')
			i++
		}
		if i < n && line[i]-'0' < 10 {
			return false
		}
		if i > r0 {
			p := v1Pow10Int[i-r0]
			d := 2*rest - p
			if d <= p/v1Tie && d >= -p/v1Tie {
				return false
			}
			if d > 0 {
				ms++
			}
		}
	}
	x.tsMs, x.ts1 = ms, i
	// node: a string without escapes.
	if n-i < len(v1Node) || string(line[i:i+len(v1Node)]) != v1Node {
		return false
	}
	i += len(v1Node)
	x.node0 = i
	for i < n && line[i] != '"' {
		if line[i] == '\\' {
			return false
		}
		i++
	}
	x.node1 = i
	// gpu: a small index, no leading zero.
	if n-i < len(v1GPU) || string(line[i:i+len(v1GPU)]) != v1GPU {
		return false
	}
	i += len(v1GPU)
	g0, gpu := i, 0
	for i < n && line[i]-'0' < 10 && i-g0 < 5 {
		gpu = gpu*10 + int(line[i]-'0')
		i++
	}
	if i == g0 || i-g0 > 4 || (i-g0 > 1 && line[g0] == '0') {
		return false
	}
	x.gpu = gpu
	// util: read by flatjson.ReadNum, as scanFast reads it.
	if n-i < len(v1Util)+1 || string(line[i:i+len(v1Util)]) != v1Util {
		return false
	}
	i += len(v1Util)
	if c := line[i]; c != '-' && c-'0' >= 10 {
		return false
	}
	j, u := i, int64(0)
	for j < n && line[j]-'0' < 10 && j-i < 13 {
		u = u*10 + int64(line[j]-'0')
		j++
	}
	if j > i && j < n && line[j] == ',' {
		// Up to 13 digits: flatjson.ReadNum's integer path, exact in hundredths.
		x.util, x.utilQ, x.utilExact = float64(u), u*100, true
	} else {
		var good bool
		if j, x.util, x.utilQ, x.utilExact, good = flatjson.ReadNum(line, i); !good || j >= n || line[j] != ',' {
			return false
		}
	}
	// mem_mb and power_w: plain numbers, skipped raw.
	if n-j < len(v1Mem) || string(line[j:j+len(v1Mem)]) != v1Mem {
		return false
	}
	x.mem = j
	x.memEnd = v1Plain(line, j+len(v1Mem))
	if x.memEnd < 0 || x.memEnd >= n || line[x.memEnd] != ',' {
		return false
	}
	i = x.memEnd
	if n-i < len(v1Power) || string(line[i:i+len(v1Power)]) != v1Power {
		return false
	}
	x.power = i
	x.powerEnd = v1Plain(line, i+len(v1Power))
	return x.powerEnd == n-1 && line[x.powerEnd] == '}'
}

// v1 members' keys as the general reader names them.
const (
	v1UtilKey  = "util"
	v1MemKey   = "mem_mb"
	v1PowerKey = "power_w"
)

// addV1 adds the reading x read from line to the block, as addLine adds the record the general reader reads from
// it (its lane, time, util value and 4 s maxima, the skipped members' names, the time range), with the keys known.
func (b *gpuBlock) addV1(line []byte, x *v1Reading) {
	lane := b.laneFor(line[x.node0:x.node1], x.gpu)
	tMs := x.tsMs
	h0, idx := b.appendTime(lane, tMs)
	var f *field
	if len(lane.order) > 0 && string(lane.order[0].name) == v1UtilKey {
		f = lane.order[0].f
	} else {
		f = b.fieldAt(lane, 0, []byte(v1UtilKey), idx) // the lane's first reading
	}
	b.appendValue(f, idx, x.util, x.utilQ, x.utilExact, int((tMs-h0)/(pyramidStep*1000)), (tMs-h0)/(fineStep*1000))
	if len(lane.skipped) < 1 || string(lane.skipped[0]) != v1MemKey {
		b.noteSkipped(lane, 0, rawSpan{line[x.mem+2 : x.mem+2+len(v1MemKey)], line[x.mem+len(v1Mem) : x.memEnd]})
	}
	if len(lane.skipped) < 2 || string(lane.skipped[1]) != v1PowerKey {
		b.noteSkipped(lane, 1, rawSpan{line[x.power+2 : x.power+2+len(v1PowerKey)], line[x.power+len(v1Power) : x.powerEnd]})
	}
	if r := &b.msRange; r.minTS != b.minTS || r.maxTS != b.maxTS {
		r.set(b.minTS, b.maxTS)
	}
	if tMs < b.msRange.lo || tMs > b.msRange.hi {
		_, ts, _, _, _ := flatjson.ReadNum(line, x.ts0) // as the general reader reads it
		b.widen(ts)
	}
}

// msRange are the milliseconds whose readings are certainly within a block's time range [minTS, maxTS]: more than
// a millisecond and a half inside it, past what rounding a time to tMs moves it (addV1 reads the float of a time
// outside them alone).
type msRange struct {
	minTS, maxTS float64
	lo, hi       int64
}

func (r *msRange) set(minTS, maxTS float64) {
	r.minTS, r.maxTS = minTS, maxTS
	r.lo, r.hi = math.MaxInt64, math.MinInt64 // an empty range: every time read
	if minTS <= maxTS && maxTS < v1MaxSeconds {
		r.lo, r.hi = int64(math.Ceil(minTS*1000))+2, int64(math.Floor(maxTS*1000))-2
	}
}

// v1Plain returns the index past the plain number (-?digits[.digits]) at line[i], or -1 where there is none: a
// value the general reader takes as a number too (flatjson.ParseNum), ending where it ends a raw value.
func v1Plain(line []byte, i int) int {
	n := len(line)
	if i < n && line[i] == '-' {
		i++
	}
	d0 := i
	for i < n && line[i]-'0' < 10 {
		i++
	}
	if i == d0 {
		return -1
	}
	if i < n && line[i] == '.' {
		i++
		f0 := i
		for i < n && line[i]-'0' < 10 {
			i++
		}
		if i == f0 {
			return -1
		}
	}
	return i
}
