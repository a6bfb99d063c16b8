package ptwrite

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// alignment is where torch's PyTorchStreamWriter starts every record's data (a multiple of 64 bytes), padding
// the local header with an "FB" extra field of 'Z's.
const alignment = 64

// zipWriter writes a torch-style zip: stored records, UTF-8 names, data descriptors after each record, no
// extra fields in the central directory, DOS date and time 0. Sizes stay below 4 GiB (no zip64).
type zipWriter struct {
	w    *bufio.Writer
	off  int64
	ents []zipEntry
	err  error
}

type zipEntry struct {
	name    string
	nameLen uint16
	crc     uint32
	size    uint32
	off     uint32
}

const (
	zipFlags = 0x0808 // bit 3: sizes in a data descriptor; bit 11: UTF-8 names
)

func (z *zipWriter) write(b []byte) {
	if z.err != nil {
		return
	}
	n, err := z.w.Write(b)
	z.off += int64(n)
	z.err = err
}

func (z *zipWriter) record(name string, data []byte) {
	if z.err != nil {
		return
	}
	// Without zip64 a size or offset must stay below 0xffffffff (the zip64 marker) and a name below 64 KiB;
	// one that does not fit is an error, never a wrapped field. off is a byte count, never negative.
	size, off := int64(len(data)), z.off
	if size >= math.MaxUint32 || off < 0 || off >= math.MaxUint32 {
		z.err = fmt.Errorf("%s: archive past 4 GiB (zip64 is not written)", name)
		return
	}
	nameLen := len(name)
	if nameLen > math.MaxUint16 {
		z.err = fmt.Errorf("record name of %d bytes is too long for a zip", nameLen)
		return
	}
	e := zipEntry{name: name, nameLen: uint16(nameLen), crc: crc32.ChecksumIEEE(data), size: uint32(size), off: uint32(off)}
	start := z.off + 30 + int64(len(name)) + 4
	pad := int((alignment - start%alignment) % alignment)
	h := make([]byte, 0, 30+len(name)+4+pad)
	h = binary.LittleEndian.AppendUint32(h, 0x04034b50)
	h = binary.LittleEndian.AppendUint16(h, 0) // version needed
	h = binary.LittleEndian.AppendUint16(h, zipFlags)
	h = binary.LittleEndian.AppendUint16(h, 0) // stored
	h = binary.LittleEndian.AppendUint32(h, 0) // DOS time and date
	h = binary.LittleEndian.AppendUint32(h, 0) // crc, sizes: in the data descriptor
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint32(h, 0)
	h = binary.LittleEndian.AppendUint16(h, e.nameLen)
	h = binary.LittleEndian.AppendUint16(h, 4+uint16(pad)) // the FB field's 4-byte header and its padding
	h = append(h, name...)
	h = append(h, 'F', 'B')
	h = binary.LittleEndian.AppendUint16(h, uint16(pad))
	h = append(h, strings.Repeat("Z", pad)...)
	z.write(h)
	z.write(data)
	d := make([]byte, 0, 16)
	d = binary.LittleEndian.AppendUint32(d, 0x08074b50)
	d = binary.LittleEndian.AppendUint32(d, e.crc)
	d = binary.LittleEndian.AppendUint32(d, e.size)
	d = binary.LittleEndian.AppendUint32(d, e.size)
	z.write(d)
	z.ents = append(z.ents, e)
}

func (z *zipWriter) close() error {
	cdStart := z.off
	for _, e := range z.ents {
		c := make([]byte, 0, 46+len(e.name))
		c = binary.LittleEndian.AppendUint32(c, 0x02014b50)
		c = binary.LittleEndian.AppendUint16(c, 0) // version made by
		c = binary.LittleEndian.AppendUint16(c, 0) // version needed
		c = binary.LittleEndian.AppendUint16(c, zipFlags)
		c = binary.LittleEndian.AppendUint16(c, 0)
		c = binary.LittleEndian.AppendUint32(c, 0)
		c = binary.LittleEndian.AppendUint32(c, e.crc)
		c = binary.LittleEndian.AppendUint32(c, e.size)
		c = binary.LittleEndian.AppendUint32(c, e.size)
		c = binary.LittleEndian.AppendUint16(c, e.nameLen)
		c = binary.LittleEndian.AppendUint16(c, 0) // extra
		c = binary.LittleEndian.AppendUint16(c, 0) // comment
		c = binary.LittleEndian.AppendUint16(c, 0) // disk
		c = binary.LittleEndian.AppendUint16(c, 0) // internal attributes
		c = binary.LittleEndian.AppendUint32(c, 0) // external attributes
		c = binary.LittleEndian.AppendUint32(c, e.off)
		c = append(c, e.name...)
		z.write(c)
	}
	// The end record's entry count is 16-bit and its offsets 32-bit. cdStart and z.off are byte counts with
	// cdStart <= z.off, so only the upper bounds can fail; the lower ones make each conversion's range explicit.
	n, cdSize := len(z.ents), z.off-cdStart
	if n > math.MaxUint16 || z.off >= math.MaxUint32 || cdStart < 0 || cdStart >= math.MaxUint32 || cdSize < 0 || cdSize >= math.MaxUint32 {
		return errors.New("archive too large for a zip without zip64")
	}
	eo := make([]byte, 0, 22)
	eo = binary.LittleEndian.AppendUint32(eo, 0x06054b50)
	eo = binary.LittleEndian.AppendUint16(eo, 0)
	eo = binary.LittleEndian.AppendUint16(eo, 0)
	eo = binary.LittleEndian.AppendUint16(eo, uint16(n))
	eo = binary.LittleEndian.AppendUint16(eo, uint16(n))
	eo = binary.LittleEndian.AppendUint32(eo, uint32(cdSize))
	eo = binary.LittleEndian.AppendUint32(eo, uint32(cdStart))
	eo = binary.LittleEndian.AppendUint16(eo, 0)
	z.write(eo)
	if z.err != nil {
		return z.err
	}
	return z.w.Flush()
}

// Write encodes v as torch.save would into w. name is the archive's folder: torch uses the file's base name
// without extension ("1_3" for train_data/1_3.pt).
func Write(w io.Writer, name string, v any) (int64, error) {
	pkl, tensors, err := Pickle(v)
	if err != nil {
		return 0, err
	}
	z := &zipWriter{w: bufio.NewWriterSize(w, 1<<20)}
	z.record(name+"/data.pkl", pkl)
	z.record(name+"/byteorder", []byte("little"))
	// torch writes the storages sorted by key as strings: 0, 1, 10, 11, …, 2
	keys := make([]string, len(tensors))
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, _ := strconv.Atoi(k)
		z.record(name+"/data/"+k, tensors[i].Data)
	}
	z.record(name+"/version", []byte("3\n"))
	if err := z.close(); err != nil {
		return z.off, err
	}
	return z.off, nil
}

// WriteFile writes v to path through a temporary file in the same directory renamed into place, so a reader
// never sees a partial .pt (the temporary name does not end in .pt). It returns the file size.
func WriteFile(path string, v any) (int64, error) {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	n, err := Write(f, base, v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return n, nil
}
