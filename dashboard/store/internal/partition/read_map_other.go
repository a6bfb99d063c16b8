//go:build !unix

package partition

import "os"

// consumeMapped maps nothing where there is no mmap: the caller reads the file.
func consumeMapped(*os.File, int64, int64, OffsetSink, string, int) (CorruptReport, int64, bool, error) {
	return CorruptReport{}, 0, false, nil
}
