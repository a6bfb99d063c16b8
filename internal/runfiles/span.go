package runfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
)

// A compressed partition ends with a zstd skippable frame (RFC 8878 §3.1.2; every zstd decoder skips it)
// saying which time span the hour's records cover: the oldest time among its first lines and the newest
// among its last ones (records arrive nearly in time order; late ones are older). Readers use it to know
// where a compressed hour's data ends without decompressing it — the dashboard compares it with the
// gpu_rollup's end to tell a data gap (nothing to read) from readings the roll-up lacks.
//
//	magic 0x184D2A5E (LE) | size 24 (LE) | "MLSP" | version 1 (LE uint32) | first float64 (LE) | last float64 (LE)
//
// The compactor appends a new frame after each new zstd frame (late records compacted into an existing .zst),
// widened to cover the previous span too, so the file's last 32 bytes always hold the whole hour's span.

const (
	spanMagic   = 0x184D2A5E
	spanPayload = 24
	// SpanTrailerLen is the size of the skippable frame AppendSpan writes.
	SpanTrailerLen = 8 + spanPayload
	// spanScan is how much of the start and end of an hour's plain text SpanOf reads.
	spanScan = 1 << 20
)

// AppendSpan appends the span frame to z (a compressed partition).
func AppendSpan(z []byte, first, last float64) []byte {
	var b [SpanTrailerLen]byte
	binary.LittleEndian.PutUint32(b[0:], spanMagic)
	binary.LittleEndian.PutUint32(b[4:], spanPayload)
	copy(b[8:], "MLSP")
	binary.LittleEndian.PutUint32(b[12:], 1)
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(first))
	binary.LittleEndian.PutUint64(b[24:], math.Float64bits(last))
	return append(z, b[:]...)
}

// SpanOf reads the span frame at the end of a compressed partition's bytes.
func SpanOf(z []byte) (first, last float64, ok bool) {
	if len(z) < SpanTrailerLen {
		return 0, 0, false
	}
	b := z[len(z)-SpanTrailerLen:]
	if binary.LittleEndian.Uint32(b[0:]) != spanMagic || binary.LittleEndian.Uint32(b[4:]) != spanPayload ||
		string(b[8:12]) != "MLSP" || binary.LittleEndian.Uint32(b[12:]) != 1 {
		return 0, 0, false
	}
	first = math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
	last = math.Float64frombits(binary.LittleEndian.Uint64(b[24:]))
	if math.IsNaN(first) || math.IsNaN(last) || first > last {
		return 0, 0, false
	}
	return first, last, true
}

// ReadSpan reads the span frame of a compressed partition file (its last 32 bytes), named under root (Open: a
// link out of root is not followed); ok is false for files written before the frame existed.
func ReadSpan(root, path string) (first, last float64, ok bool) {
	f, err := Open(root, path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < SpanTrailerLen {
		return 0, 0, false
	}
	b := make([]byte, SpanTrailerLen)
	if _, err := f.ReadAt(b, fi.Size()-SpanTrailerLen); err != nil {
		return 0, 0, false
	}
	return SpanOf(b)
}

// widenSpan is the span of old (a compressed partition, maybe ending with a span frame) and of the plain text
// about to be compressed after it; ok is false when neither says.
func widenSpan(old, plain []byte) (first, last float64, ok bool) {
	first, last, ok = SpanOfLines(plain)
	if f0, l0, had := SpanOf(old); had {
		if !ok {
			return f0, l0, true
		}
		first, last = math.Min(first, f0), math.Max(last, l0)
	}
	return first, last, ok
}

// SpanOfLines returns the oldest time among the first lines of plain JSONL text and the newest among its last
// lines (up to 1 MiB each): the members "ts", "t", "t0" and "t1" of each record. ok is false when none was
// found.
func SpanOfLines(plain []byte) (first, last float64, ok bool) {
	first, last = math.Inf(1), math.Inf(-1)
	scan := func(chunk []byte) {
		for line := range bytes.SplitSeq(chunk, []byte{'\n'}) {
			for _, key := range []string{`"ts":`, `"t":`, `"t0":`, `"t1":`} {
				i := bytes.Index(line, []byte(key))
				if i < 0 {
					continue
				}
				j := i + len(key)
				k := j
				for k < len(line) && (line[k] >= '0' && line[k] <= '9' || line[k] == '.' || line[k] == 'e' || line[k] == 'E' || line[k] == '+' || line[k] == '-') {
					k++
				}
				if v, err := strconv.ParseFloat(string(line[j:k]), 64); err == nil && v > 0 {
					first, last = math.Min(first, v), math.Max(last, v)
				}
			}
		}
	}
	if len(plain) <= 2*spanScan {
		scan(plain)
	} else {
		head := plain[:spanScan]
		scan(head[:bytes.LastIndexByte(head, '\n')+1])
		tail := plain[len(plain)-spanScan:]
		scan(tail[bytes.IndexByte(tail, '\n')+1:])
	}
	return first, last, first <= last
}

// SpanOfFile is SpanOfLines for the first n bytes of r (plain JSONL text through its last newline), reading only
// the first and last MiB, so a compaction need not hold the hour in memory.
func SpanOfFile(r io.ReaderAt, n int64) (first, last float64, ok bool, err error) {
	if n <= 2*spanScan {
		buf := make([]byte, n)
		if _, err := r.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, false, err
		}
		first, last, ok = SpanOfLines(buf)
		return first, last, ok, nil
	}
	head, tail := make([]byte, spanScan), make([]byte, spanScan)
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, err
	}
	if _, err := r.ReadAt(tail, n-spanScan); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, err
	}
	// As SpanOfLines: whole lines of the head's start and of the tail's end.
	f0, l0, ok0 := SpanOfLines(head[:bytes.LastIndexByte(head, '\n')+1])
	f1, l1, ok1 := SpanOfLines(tail[bytes.IndexByte(tail, '\n')+1:])
	switch {
	case ok0 && ok1:
		return math.Min(f0, f1), math.Max(l0, l1), true, nil
	case ok0:
		return f0, l0, true, nil
	default:
		return f1, l1, ok1, nil
	}
}
