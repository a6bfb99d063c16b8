package dumps

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// UnavailableError means a file is still being written (young and incomplete): retry later (HTTP 503).
type UnavailableError struct {
	Path   string
	Reason string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s is still being written (%s); retry in a few seconds", e.Path, e.Reason)
}

// FileCorruptError is a dump that is complete on disk (old enough) but cannot be read.
type FileCorruptError struct {
	Path string
	Err  error
}

func (e *FileCorruptError) Error() string { return fmt.Sprintf("%s is corrupt: %v", e.Path, e.Err) }

func (e *FileCorruptError) Unwrap() error { return e.Err }

// DefaultSettle is how young an unreadable file may be and still count as "being written".
const DefaultSettle = 30 * time.Second

// maxPickle bounds the data.pkl record read into memory.
const maxPickle = 2 << 30

// Archive is one open torch zip (`torch.save` with the zip serialization): data.pkl plus data/<key> records.
type Archive struct {
	Path    string // as shown to users (relative to the run directory)
	ra      io.ReaderAt
	closer  io.Closer
	zr      *zip.Reader
	Size    int64
	ModTime time.Time
	pkl     *zip.File
	recs    map[string]*zip.File

	mu   sync.Mutex
	offs map[*zip.File]int64 // data offsets of stored records, found on first read
}

// OpenArchive opens a torch zip on its own, under its directory: a link that leads out of it is not followed. A
// file that does not parse is reported as UnavailableError while younger than settle (torch writes the central
// directory last), else as FileCorruptError.
func OpenArchive(path, shown string, settle time.Duration) (*Archive, error) {
	return openArchive(filepath.Dir(path), path, shown, settle)
}

// openArchive is OpenArchive for a file of the run in root: a link out of the run is not followed
// (runfiles.ErrOutsideRun).
func openArchive(root, path, shown string, settle time.Duration) (*Archive, error) {
	f, err := runfiles.Open(root, path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	a, err := newArchive(f, fi.Size(), shown)
	if err != nil {
		f.Close()
		return nil, classify(shown, fi.ModTime(), settle, err)
	}
	a.closer, a.ModTime = f, fi.ModTime()
	return a, nil
}

// newArchive indexes a torch zip held by ra.
func newArchive(ra io.ReaderAt, size int64, shown string) (*Archive, error) {
	a := &Archive{Path: shown, ra: ra, Size: size, offs: map[*zip.File]int64{}}
	if err := a.index(); err != nil {
		return nil, err
	}
	return a, nil
}

func classify(shown string, mod time.Time, settle time.Duration, err error) error {
	if _, ok := errors.AsType[*ForbiddenError](err); ok {
		return err
	}
	var ce *FileCorruptError
	isCorrupt := errors.As(err, &ce)
	if time.Since(mod) < settle {
		if isCorrupt {
			err = ce.Err
		}
		return &UnavailableError{Path: shown, Reason: err.Error()}
	}
	if isCorrupt {
		return err
	}
	return &FileCorruptError{Path: shown, Err: err}
}

func (a *Archive) index() error {
	zr, err := zip.NewReader(a.ra, a.Size)
	if err != nil {
		return fmt.Errorf("not a complete torch zip archive (%w)", err)
	}
	a.zr = zr
	a.recs = make(map[string]*zip.File, len(zr.File))
	prefix := ""
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "/data.pkl") || zf.Name == "data.pkl" {
			if a.pkl != nil {
				return errors.New("archive holds more than one data.pkl")
			}
			a.pkl = zf
			prefix = strings.TrimSuffix(zf.Name, "data.pkl")
		}
	}
	if a.pkl == nil {
		return errors.New("archive has no data.pkl (not a torch.save file, or a legacy non-zip one)")
	}
	for _, zf := range zr.File {
		if rest, ok := strings.CutPrefix(zf.Name, prefix+"data/"); ok {
			a.recs[rest] = zf
		}
		if zf.Name == prefix+"byteorder" {
			b, err := a.readAll(zf, 16)
			if err == nil && strings.TrimSpace(string(b)) == "big" {
				return errors.New("big-endian archives are not supported")
			}
		}
	}
	return nil
}

// Close releases the file.
func (a *Archive) Close() error {
	if a.closer == nil {
		return nil
	}
	return a.closer.Close()
}

func (a *Archive) readAll(zf *zip.File, limit uint64) ([]byte, error) {
	if zf.UncompressedSize64 > limit {
		return nil, fmt.Errorf("%s is %d bytes (limit %d)", zf.Name, zf.UncompressedSize64, limit)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	hint := min(zf.UncompressedSize64,
		// never trust a header for the allocation: grow as data arrives (a file's size is never negative)
		uint64(max(a.Size, 0)))
	b := make([]byte, 0, hint)
	buf := make([]byte, 64<<10)
	for {
		n, err := rc.Read(buf)
		b = append(b, buf[:n]...)
		if uint64(len(b)) > limit {
			return nil, fmt.Errorf("%s exceeds %d bytes", zf.Name, limit)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// PickleBytes reads data.pkl (checked against its CRC).
func (a *Archive) PickleBytes() ([]byte, error) {
	b, err := a.readAll(a.pkl, maxPickle)
	if err != nil {
		return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("data.pkl: %w", err)}
	}
	return b, nil
}

// Decode decodes data.pkl, resolving storages against the archive's records.
func (a *Archive) Decode(b []byte, opts DecodeOptions) (any, error) {
	storages := map[string]*Storage{}
	opts.PersistentLoad = func(pid any) (any, error) {
		t, ok := pid.(Tuple)
		if !ok || len(t) != 5 {
			return nil, corruptf("persistent id is %s, not a torch storage record", describe(pid))
		}
		kind, _ := t[0].(string)
		g, ok1 := t[1].(*global)
		key, ok2 := t[2].(string)
		numel, ok3 := asInt(t[4])
		if kind != "storage" || !ok1 || g.spec.kind != kStorageType || !ok2 || !ok3 || numel < 0 {
			return nil, corruptf("malformed torch storage record")
		}
		if s, ok := storages[key]; ok {
			return s, nil
		}
		zf, ok := a.recs[key]
		if !ok {
			return nil, corruptf("storage data/%s is missing from the archive", key)
		}
		es := int64(g.spec.dtype.Size())
		if numel > math.MaxInt64/es || numel*es > int64(min(zf.UncompressedSize64, math.MaxInt64)) {
			return nil, corruptf("storage data/%s holds %d bytes, fewer than %d elements of %s",
				key, zf.UncompressedSize64, numel, g.spec.dtype)
		}
		s := &Storage{Key: key, DType: g.spec.dtype, Numel: numel}
		storages[key] = s
		return s, nil
	}
	v, err := Decode(b, opts)
	if err != nil {
		if _, ok := errors.AsType[*ForbiddenError](err); ok {
			return nil, err
		}
		return nil, &FileCorruptError{Path: a.Path, Err: err}
	}
	return v, nil
}

// readAt reads n bytes at offset off of a record's uncompressed data. Stored records (what torch writes) are
// read in place; a compressed one is streamed up to the range.
func (a *Archive) readAt(zf *zip.File, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || uint64(off+n) > zf.UncompressedSize64 {
		return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("%s: range [%d,%d) outside %d bytes", zf.Name,
			off, off+n, zf.UncompressedSize64)}
	}
	if zf.Method == zip.Store {
		a.mu.Lock()
		base, ok := a.offs[zf]
		a.mu.Unlock()
		if !ok {
			var err error
			if base, err = zf.DataOffset(); err != nil {
				return nil, &FileCorruptError{Path: a.Path, Err: err}
			}
			a.mu.Lock()
			a.offs[zf] = base
			a.mu.Unlock()
		}
		if base+off+n > a.Size {
			return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("%s: record extends past the end of the file", zf.Name)}
		}
		buf := make([]byte, n)
		if _, err := a.ra.ReadAt(buf, base+off); err != nil {
			return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("%s: %w", zf.Name, err)}
		}
		return buf, nil
	}
	if n > 1<<30 {
		return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("%s: compressed record range too large", zf.Name)}
	}
	buf := make([]byte, n)
	rc, err := zf.Open()
	if err != nil {
		return nil, &FileCorruptError{Path: a.Path, Err: err}
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, off); err != nil {
		return nil, &FileCorruptError{Path: a.Path, Err: err}
	}
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, &FileCorruptError{Path: a.Path, Err: err}
	}
	return buf, nil
}

// PickleRange reads bytes [start, end) of data.pkl (a lazy list's span).
func (a *Archive) PickleRange(start, end int) ([]byte, error) {
	return a.readAt(a.pkl, int64(start), int64(end-start))
}

// TensorRaw reads the raw little-endian bytes of elements [from, to) of a tensor in row-major order.
func (a *Archive) TensorRaw(t *Tensor, from, to int64) ([]byte, error) {
	n := t.Numel()
	if from < 0 || to > n || from > to {
		return nil, fmt.Errorf("tensor range [%d,%d) outside %d elements", from, to, n)
	}
	zf := a.recs[t.Storage.Key]
	es := int64(t.DType.Size())
	if contiguous(t) {
		return a.readAt(zf, (t.Offset+from)*es, (to-from)*es)
	}
	// strided view: read the covering byte range once, gather
	lo, hi := t.Offset, t.Offset
	for i, s := range t.Shape {
		if s > 0 {
			hi += (s - 1) * t.Stride[i]
		}
	}
	raw, err := a.readAt(zf, lo*es, (hi-lo+1)*es)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, (to-from)*es)
	idx := make([]int64, len(t.Shape))
	for k := range n {
		if k >= from && k < to {
			e := int64(0)
			for i := range idx {
				e += idx[i] * t.Stride[i]
			}
			out = append(out, raw[e*es:(e+1)*es]...)
		}
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < t.Shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

func contiguous(t *Tensor) bool {
	want := int64(1)
	for i, v := range slices.Backward(t.Shape) {
		if v != 1 && t.Stride[i] != want {
			return false
		}
		want *= v
	}
	return true
}

// Float32s converts raw little-endian elements of a numeric type to float32.
func Float32s(raw []byte, dt DType) []float32 {
	n := len(raw) / dt.Size()
	out := make([]float32, n)
	switch dt {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	default:
		for i := range out {
			switch v := scalarAt(raw, dt, i).(type) {
			case float64:
				out[i] = float32(v)
			case int64:
				out[i] = float32(v)
			case bool:
				if v {
					out[i] = 1
				}
			}
		}
	}
	return out
}

// Int64s converts raw little-endian integer (or bool) elements to int64.
func Int64s(raw []byte, dt DType) []int64 {
	n := len(raw) / dt.Size()
	out := make([]int64, n)
	for i := range out {
		switch v := scalarAt(raw, dt, i).(type) {
		case int64:
			out[i] = v
		case float64:
			out[i] = int64(v)
		case bool:
			if v {
				out[i] = 1
			}
		}
	}
	return out
}
