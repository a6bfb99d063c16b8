package jsonlexporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// compactor compresses closed hours with zstd once they are older than the grace period, so a week-long run
// keeps its history at a fraction of the bytes. It runs on the flush goroutine (it closes the partition's
// file first), every checkEvery.
//
// A late record for an hour already compressed creates a new plain file beside the .zst; the next pass
// appends it to the .zst as another zstd frame (concatenated frames are one valid stream).
type compactor struct {
	runDir     string
	grace      time.Duration
	checkEvery time.Duration
	last       time.Time
	part       *partitioner
	onError    func(error)
	enc        *zstd.Encoder
}

func newCompactor(runDir string, grace time.Duration, part *partitioner, onError func(error)) (*compactor, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	every := min(max(grace/4, time.Second), time.Minute)
	return &compactor{runDir: runDir, grace: grace, checkEvery: every, part: part, onError: onError, enc: enc}, nil
}

func (c *compactor) maybeRun(now time.Time) {
	if now.Sub(c.last) < c.checkEvery {
		return
	}
	c.last = now
	for _, stream := range sc.Streams {
		parts, err := runfiles.ListPartitions(c.runDir, stream)
		if err != nil {
			c.onError(err)
			continue
		}
		for _, p := range parts {
			if p.Plain == "" || now.Sub(p.Hour.Add(time.Hour)) < c.grace {
				continue
			}
			c.part.closeKey(partKey{stream: stream, hour: p.Hour.Unix() / 3600})
			if err := c.compress(p); err != nil {
				c.onError(fmt.Errorf("compress %s: %w", p.Plain, err))
			}
		}
	}
}

// compress turns p's plain file into (another frame of) its .zst. Steps: write .zst.tmp = old .zst + new
// frame, fsync, rename over .zst, remove the plain file. After a crash between the rename and the remove,
// the plain file's content is already the .zst's tail; that is detected and only the remove is redone, so
// no record is ever doubled or lost.
func (c *compactor) compress(p runfiles.Partition) error {
	plain, err := os.ReadFile(p.Plain)
	if err != nil {
		return err
	}
	// Keep complete lines only; a torn tail is not a record (the partitioner would cut it at reopen too).
	if i := bytes.LastIndexByte(plain, '\n'); i+1 != len(plain) {
		plain = plain[:i+1]
	}
	zpath := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
	var old []byte
	if p.Compressed != "" {
		if old, err = os.ReadFile(p.Compressed); err != nil {
			return err
		}
		if len(plain) > 0 {
			done, err := endsWith(old, plain)
			if err != nil {
				return fmt.Errorf("%s is unreadable, leaving %s uncompressed: %w", p.Compressed, p.Plain, err)
			}
			if done {
				return os.Remove(p.Plain)
			}
		}
	}
	if len(plain) == 0 {
		return os.Remove(p.Plain)
	}
	first, last, spanOK := runfiles.WidenSpan(old, plain)
	out := c.enc.EncodeAll(plain, old)
	if spanOK {
		out = runfiles.AppendSpan(out, first, last) // readers learn where the hour ends without decompressing it
	}
	tmp := zpath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, zpath); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(p.Plain)
}

// endsWith reports whether the decompressed zstd stream z ends with suffix.
func endsWith(z, suffix []byte) (bool, error) {
	dec, err := zstd.NewReader(bytes.NewReader(z), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return false, err
	}
	defer dec.Close()
	all, err := io.ReadAll(dec)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.HasSuffix(all, suffix), nil
}

func (c *compactor) close() { _ = c.enc.Close() }
