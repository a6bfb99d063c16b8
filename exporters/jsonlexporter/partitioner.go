package jsonlexporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// file is the part of *os.File the partitioner uses; tests wrap it to simulate a full or failing disk.
type file interface {
	io.Writer
	io.ReaderAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

// fileSystem opens partition files; osFS in production, a fault-injecting one in tests.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	MkdirAll(path string, perm os.FileMode) error
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }

type openFile struct {
	f    file
	size int64  // bytes known to end on a line boundary
	used uint64 // LRU clock of the last write
}

// partitioner maps a partition key to its append-only file and keeps a small LRU of open files.
// Only the writer's flush goroutine calls it, so it needs no lock.
type partitioner struct {
	root     string // {run}/dashboard
	fs       fileSystem
	maxOpen  int
	syncMode string // fsync policy: never | rotate | flush
	open     map[partKey]*openFile
	// goodSize remembers, for files dropped after a failed write whose rollback also failed, how many bytes
	// were good: at reopen the file is cut back there, so the partial write's complete lines are not
	// duplicated when the queued records are written again.
	goodSize map[partKey]int64
	clock    uint64
	repaired int64 // bytes of torn tails cut at open (a previous crash mid-write)
}

func newPartitioner(root string, fs fileSystem, maxOpen int, syncMode string) *partitioner {
	return &partitioner{root: root, fs: fs, maxOpen: maxOpen, syncMode: syncMode, open: map[partKey]*openFile{}, goodSize: map[partKey]int64{}}
}

// path is the plain partition file of k. Stream names come from a fixed set, but the result is still checked
// to stay under the run directory so no input can ever name a file elsewhere.
func (p *partitioner) path(k partKey) (string, error) {
	name := runfiles.HourName(time.Unix(k.hour*3600, 0)) + runfiles.PlainExt
	full := filepath.Join(p.root, k.stream, name)
	if !strings.HasPrefix(full, filepath.Clean(p.root)+string(filepath.Separator)) || strings.ContainsAny(k.stream, `/\`) {
		return "", fmt.Errorf("partition path %q escapes %q", full, p.root)
	}
	return full, nil
}

func (p *partitioner) get(k partKey) (*openFile, error) {
	p.clock++
	if of, ok := p.open[k]; ok {
		of.used = p.clock
		return of, nil
	}
	path, err := p.path(k)
	if err != nil {
		return nil, err
	}
	if err := p.fs.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := p.fs.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644) // read: tail repair
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := fi.Size()
	if good, ok := p.goodSize[k]; ok && good <= size {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, err
		}
		size = good
	}
	size, err = p.repairTail(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	if len(p.open) >= p.maxOpen {
		p.evictOldest()
	}
	delete(p.goodSize, k)
	of := &openFile{f: f, size: size, used: p.clock}
	p.open[k] = of
	return of, nil
}

// repairTail cuts a torn last line (a crash or a failed write left bytes after the last '\n') so the next
// record starts on a fresh line; the torn fragment was never a complete record.
func (p *partitioner) repairTail(f file, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return size, nil
	}
	const step = 64 << 10
	buf := make([]byte, step)
	end := size
	for end > 0 {
		start := max(end-step, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			cut := start + int64(i) + 1
			if err := f.Truncate(cut); err != nil {
				return 0, err
			}
			p.repaired += size - cut
			return cut, nil
		}
		end = start
	}
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	p.repaired += size
	return 0, nil
}

// write appends buffers of whole lines to k's partition, one write each. A failed or short write rolls the
// file back to where this call started, so readers never see a torn record and a retry does not duplicate; if
// even the rollback fails the file is dropped and cut back at its next open.
func (p *partitioner) write(k partKey, bufs [][]byte) error {
	of, err := p.get(k)
	if err != nil {
		return err
	}
	var total int
	for _, data := range bufs {
		var n int
		n, err = of.f.Write(data)
		total += n
		if err == nil && n < len(data) {
			err = io.ErrShortWrite
		}
		if err != nil {
			break
		}
	}
	n := total
	if err != nil {
		if n > 0 {
			if terr := of.f.Truncate(of.size); terr != nil {
				p.goodSize[k] = of.size
				p.drop(k)
				return errors.Join(err, terr)
			}
		}
		return err
	}
	of.size += int64(n)
	return nil
}

// syncAll fsyncs every open file (fsync policy "flush").
func (p *partitioner) syncAll() error {
	var errs []error
	for _, of := range p.open {
		if err := of.f.Sync(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *partitioner) evictOldest() {
	var oldest partKey
	least := ^uint64(0)
	for k, of := range p.open {
		if of.used < least {
			oldest, least = k, of.used
		}
	}
	p.closeKey(oldest)
}

// closeKey closes k's file if open; fsync first unless the policy is "never".
func (p *partitioner) closeKey(k partKey) {
	of, ok := p.open[k]
	if !ok {
		return
	}
	if p.syncMode != "never" {
		_ = of.f.Sync()
	}
	_ = of.f.Close()
	delete(p.open, k)
}

func (p *partitioner) drop(k partKey) {
	if of, ok := p.open[k]; ok {
		_ = of.f.Close()
		delete(p.open, k)
	}
}

// closeBefore closes files of hours before hour: they are finished and the LRU slot is better used elsewhere.
func (p *partitioner) closeBefore(hour int64) {
	for k := range p.open {
		if k.hour < hour {
			p.closeKey(k)
		}
	}
}

func (p *partitioner) closeAll() {
	for k := range p.open {
		p.closeKey(k)
	}
}
