package runfiles

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// A compacted trajectories hour carries its keys (docs/semconv.md §8 "Summary frames"): the traces and samples
// its records belong to, so a reader looking for a few of them (a step's anatomy, reading the hours before its
// batch for its samples' records; the pool, for the traces later hours name) learns without decompressing the
// hour that it holds none of them, and reads only the lines every such reader keeps: those with no trace id where
// a bundle has it, and the weight updates and step consumes. A summary frame (summary_frame.go) of magic
// 0x184D2A5B and tag "MLKY", without head, whose body is
//
//	lines size (uvarint) | lines | trace count (uvarint) | traces (LE uint64 each, ascending) |
//	range count (uvarint) | sample ranges (first uvarint, then the count after it uvarint)
//
// traces are the last 8 bytes (big endian; the random ones of a 64-bit id written as 128 bits) of the other lines'
// trace ids; the sample ranges, ascending and apart, cover every number after a `sample":` of those lines, read as
// the dashboard reads one. A reader that
// wants none of the traces and none of the samples reads the lines alone and has every line it keeps; one that
// wants any reads the hour (two traces sharing 8 bytes only make it read the hour).

const (
	keysMagic = 0x184D2A5B
	keysTag   = "MLKY"
)

// HourKeys are a compacted trajectories hour's keys (above).
type HourKeys struct {
	// Lines are the hour's lines with no trace id at their start, weight updates and step consumes, in file order.
	Lines []byte
	// Traces are the other lines' trace ids' last 8 bytes (big endian), ascending, once each.
	Traces []uint64
	// Samples are ranges [first, last] of the samples those lines name, ascending and apart.
	Samples [][2]int32
}

// traceLinePrefix is how a trajectories bundle starts: its trace id first.
var traceLinePrefix = []byte(`{"trace":"`)

// LineTrace is the trace id a trajectories (or engine_traces) line starts with; ok is false for a line that does
// not start with one.
func LineTrace(line []byte) (id [16]byte, ok bool) {
	n := len(traceLinePrefix)
	if !bytes.HasPrefix(line, traceLinePrefix) || len(line) < n+33 || line[n+32] != '"' {
		return id, false
	}
	_, err := hex.Decode(id[:], line[n:n+32])
	return id, err == nil
}

// LineSamples calls fn for each `sample":` of a trajectories line, as the dashboard reads one: member says it
// follows a quote (the line has a member named sample; `"sub_sample":` has not), ok that a number follows (white
// space and quotes skipped, at most 10 digits, at most MaxInt32), n the number. fn returning true stops the walk.
func LineSamples(line []byte, fn func(n int32, ok, member bool) bool) {
	for rest := line; ; {
		i := bytes.Index(rest, []byte(`sample":`))
		if i < 0 {
			return
		}
		member := i > 0 && rest[i-1] == '"'
		rest = rest[i+8:]
		k := 0
		for k < len(rest) && (rest[k] == ' ' || rest[k] == '"') {
			k++
		}
		n, digits := int64(0), 0
		for ; k < len(rest) && rest[k] >= '0' && rest[k] <= '9' && digits < 10; k, digits = k+1, digits+1 {
			n = n*10 + int64(rest[k]-'0')
		}
		ok := digits > 0 && n <= math.MaxInt32
		if !ok {
			n = 0
		}
		if fn(int32(n), ok, member) {
			return
		}
	}
}

// keyedAlways says a line with a trace id is one every reader of the keys keeps: a weight update or a step consume.
func keyedAlways(line []byte) bool {
	return bytes.Contains(line, []byte(`"type":"weight_update"`)) || bytes.Contains(line, []byte(`"type":"step_consume"`))
}

// HourKeysOf are the keys of the trajectories hour whose text is r's first n bytes (complete lines); ok is false
// when the lines every reader keeps are over half the hour.
func HourKeysOf(r io.ReaderAt, n int64) (HourKeys, bool, error) {
	var k HourKeys
	traces := map[uint64]struct{}{}
	samples := map[int32]struct{}{}
	lines := NewLines(io.NewSectionReader(r, 0, n), MaxLine)
	for {
		line, _, ok := lines.Next()
		if !ok {
			if err := lines.Err(); err != nil {
				return HourKeys{}, false, err
			}
			break
		}
		if line == nil {
			return HourKeys{}, false, nil // over MaxLine: a reader reports it; with no keys it reads the hour
		}
		id, ok := LineTrace(line)
		if !ok || keyedAlways(line) {
			if int64(len(k.Lines)+len(line)+1) > n/2 {
				return HourKeys{}, false, nil
			}
			k.Lines = append(append(k.Lines, line...), '\n')
			continue
		}
		traces[binary.BigEndian.Uint64(id[8:])] = struct{}{}
		LineSamples(line, func(s int32, ok, _ bool) bool {
			if ok {
				samples[s] = struct{}{}
			}
			return false
		})
	}
	k.Traces = make([]uint64, 0, len(traces))
	for t := range traces {
		k.Traces = append(k.Traces, t)
	}
	slices.Sort(k.Traces)
	ss := make([]int32, 0, len(samples))
	for s := range samples {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	for _, s := range ss {
		if l := len(k.Samples); l > 0 && k.Samples[l-1][1] == s-1 {
			k.Samples[l-1][1] = s
		} else {
			k.Samples = append(k.Samples, [2]int32{s, s})
		}
	}
	return k, true, nil
}

// HasTrace says whether the hour's keyed lines may hold trace id.
func (k *HourKeys) HasTrace(id [16]byte) bool {
	_, ok := slices.BinarySearch(k.Traces, binary.BigEndian.Uint64(id[8:]))
	return ok
}

// HasSample says whether the hour's keyed lines name sample s.
func (k *HourKeys) HasSample(s int32) bool {
	i, _ := slices.BinarySearchFunc(k.Samples, s, func(r [2]int32, s int32) int {
		switch {
		case r[1] < s:
			return -1
		case r[0] > s:
			return 1
		}
		return 0
	})
	return i < len(k.Samples) && k.Samples[i][0] <= s && s <= k.Samples[i][1]
}

// AppendHourKeys appends keys as a summary frame to b, which holds the compacted hour they stand for up to covered
// (where the frame starts); enc compresses them.
func AppendHourKeys(b []byte, enc *zstd.Encoder, covered int64, keys HourKeys) []byte {
	body := appendLines(nil, keys.Lines)
	body = binary.AppendUvarint(body, uint64(len(keys.Traces)))
	for _, t := range keys.Traces {
		body = binary.LittleEndian.AppendUint64(body, t)
	}
	body = binary.AppendUvarint(body, uint64(len(keys.Samples)))
	for _, s := range keys.Samples {
		body = binary.AppendUvarint(body, uint64(s[0]))      //nolint:gosec // a sample index, not negative
		body = binary.AppendUvarint(body, uint64(s[1]-s[0])) //nolint:gosec // last ≥ first
	}
	return appendSummaryFrame(b, keysMagic, keysTag, covered, nil, body, enc)
}

// ReadHourKeys reads the keys of compressed trajectories partition f (size bytes long); an error when it has
// none standing for the whole hour.
func ReadHourKeys(f io.ReaderAt, size int64) (HourKeys, error) {
	_, body, err := readSummaryFrame(f, size, keysMagic, keysTag, 0)
	if err != nil {
		return HourKeys{}, err
	}
	r := bodyReader{b: body, ok: true}
	k := HourKeys{Lines: r.lines()}
	nt := r.count(8)
	k.Traces = make([]uint64, nt)
	for i := range k.Traces {
		k.Traces[i] = r.uint64()
		if i > 0 && k.Traces[i] <= k.Traces[i-1] {
			r.ok = false
		}
	}
	ns := r.count(2)
	k.Samples = make([][2]int32, 0, ns)
	last := int64(-2)
	for range ns {
		first := int64(r.uvarint())       //nolint:gosec // checked below
		end := first + int64(r.uvarint()) //nolint:gosec // checked below
		if first <= last+1 || end > math.MaxInt32 || first < 0 || end < first {
			r.ok = false
			break
		}
		k.Samples = append(k.Samples, [2]int32{int32(first), int32(end)}) //nolint:gosec // 0 ≤ first ≤ end ≤ MaxInt32, checked above
		last = end
	}
	if !r.ok || len(r.b) != 0 {
		return HourKeys{}, fmt.Errorf("%w: malformed trajectories keys", errNoSummary)
	}
	return k, nil
}
