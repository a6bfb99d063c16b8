//go:build unix

package partition

import (
	"os"
	"runtime/debug"
	"syscall"
)

// consumeMapped is consume of the plain file f from off to size, read from a read-only mapping of it (no copy
// into a read buffer, no read system call per 256 KiB); mapped false when the file could not be mapped (the
// caller reads it as usual). A file cut short while mapped (a tail repair after a crash) faults on its lost
// pages: that fault is caught and reported as ErrReload, as a truncated file found by Stat is.
func consumeMapped(f *os.File, off, size int64, sink OffsetSink, path string, maxLine int) (rep CorruptReport, n int64, mapped bool, err error) {
	start := off &^ int64(os.Getpagesize()-1) // a mapping starts on a page
	if size-start > int64(^uint(0)>>1) {
		return rep, 0, false, nil
	}
	data, merr := syscall.Mmap(int(f.Fd()), start, int(size-start), syscall.PROT_READ, syscall.MAP_SHARED)
	if merr != nil {
		return rep, 0, false, nil
	}
	defer func() { _ = syscall.Munmap(data) }()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			rep, n, mapped, err = CorruptReport{}, 0, true, ErrReload
		}
	}()
	rep, n = consumeBytes(data[off-start:], off, sink, path, maxLine)
	return rep, n, true, nil
}
