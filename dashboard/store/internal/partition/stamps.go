package partition

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// ScanLastStamp decompresses a compacted partition file of the run in runDir and returns the newest time among
// its last lines (LastStamp's rule), +Inf when it cannot be read (a link out of the run is not followed).
func ScanLastStamp(runDir, path string) float64 {
	f, err := runfiles.Open(runDir, path)
	if err != nil {
		return math.Inf(1)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
	if err != nil {
		return math.Inf(1)
	}
	defer dec.Close()
	// Keep the last 128 KiB of the stream.
	buf := make([]byte, 1<<20)
	tail := make([]byte, 0, 256<<10)
	for {
		n, err := dec.Read(buf)
		tail = append(tail, buf[:n]...)
		if len(tail) > 128<<10 {
			tail = append(tail[:0], tail[len(tail)-128<<10:]...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return math.Inf(1)
		}
	}
	return LastStampIn(tail)
}

// FirstStamp reads the first complete line of each of a Partition's files (of the run in runDir) and returns
// the oldest time among them (0 when there is none).
func FirstStamp(runDir string, p *Partition) float64 {
	t := 0.0
	for _, f := range p.Files {
		if v := f.firstStamp(runDir); v > 0 && (t == 0 || v < t) {
			t = v
		}
	}
	return t
}

func (p *File) firstStamp(runDir string) float64 {
	line := p.firstLine(runDir)
	t := 0.0
	_ = flatjson.Scan(line, func(key, val []byte, _ bool) {
		switch string(key) {
		case "ts", "t0":
			if v, ok := flatjson.ParseNum(val); ok && (t == 0 || v < t) {
				t = v
			}
		}
	})
	return t
}

// FirstLine is the first complete line of a Partition's first file (of the run in runDir) that has one (from
// the compressed form when there is one, reading only its first frame's start), nil when there is none or it
// is longer than 64 KiB.
func FirstLine(runDir string, p *Partition) []byte {
	for _, f := range p.Files {
		if line := f.firstLine(runDir); line != nil {
			return line
		}
	}
	return nil
}

// firstLineDecoders are firstLine's zstd decoders, reused: a decoder allocates (and clears) a history of the
// frame's window on its first block, 8 MiB for a compacted hour, and opening a run asks for the first line of
// every hour in the window. Synchronous (concurrency 1), they hold no goroutines when dropped.
var firstLineDecoders = sync.Pool{New: func() any {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil
	}
	return dec
}}

func (p *File) firstLine(runDir string) []byte {
	var r io.Reader
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	switch {
	case p.Zst != "":
		f, err := runfiles.Open(runDir, p.Zst)
		if err != nil {
			return nil
		}
		closers = append(closers, f)
		dec, _ := firstLineDecoders.Get().(*zstd.Decoder)
		if dec == nil || dec.Reset(f) != nil {
			return nil
		}
		defer firstLineDecoders.Put(dec)
		r = dec
	case p.Plain != "":
		f, err := runfiles.Open(runDir, p.Plain)
		if err != nil {
			return nil
		}
		closers = append(closers, f)
		r = f
	default:
		return nil
	}
	line, err := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
	if err != nil {
		return nil
	}
	return append([]byte(nil), line...)
}

// LastStamp is the newest time among the complete lines of the last 64 KiB of a plain file of the run in
// runDir, 0 when there is none.
func LastStamp(runDir, path string) float64 {
	if path == "" {
		return 0
	}
	f, err := runfiles.Open(runDir, path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	off := max(fi.Size()-64<<10, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	return LastStampIn(buf[:n])
}

// LastStampIn returns the newest time among the complete lines at the end of buf.
func LastStampIn(buf []byte) float64 {
	best := 0.0
	// Scan the complete lines of the tail; records are not strictly time-ordered, take the max.
	end := len(buf)
	for end > 0 {
		nl := bytes.LastIndexByte(buf[:end], '\n')
		if nl < 0 {
			break
		}
		start := bytes.LastIndexByte(buf[:nl], '\n') + 1
		line := buf[start:nl]
		_ = flatjson.Scan(line, func(key, val []byte, _ bool) {
			switch string(key) {
			case "ts", "t1", "t0":
				if v, ok := flatjson.ParseNum(val); ok && v > best {
					best = v
				}
			}
		})
		end = start
		if start == 0 || len(buf)-start > 16<<10 {
			break
		}
	}
	return best
}
