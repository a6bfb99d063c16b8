package jsonlexporter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Start-up on a run directory that may be full, read-only or left by a crash (README "The run directory",
// docs/operations.md). Nothing here fails the start: a collector that cannot write yet still accepts data into
// its bounded queue, logs one loud error, and writes meta.json and the records once the disk recovers, exactly
// as when the disk fails while it runs.

// metaWriter writes meta.json for this start; until it succeeded the flush goroutine retries every flush.
type metaWriter struct {
	dash, runName, shard, version string
	started                       time.Time // the start recorded, whenever the write succeeds
	done                          bool
}

// write tries once; it is called at start and then by the flush goroutine only.
func (m *metaWriter) write() error {
	if m.done {
		return nil
	}
	if err := os.MkdirAll(m.dash, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", m.dash, err)
	}
	if err := writeMeta(m.dash, m.runName, m.shard, m.version, m.started); err != nil {
		return fmt.Errorf("cannot write meta.json in %s: %w", m.dash, err)
	}
	m.done = true
	return nil
}

// repairRunDir cuts, in one layout root ({run}/dashboard or a shard's directory), the torn tail a crash left on any plain partition (bytes after its last '\n') and removes
// the temporary files of an interrupted atomic write or compaction (*.tmp), so a reader sees whole records from
// the moment the collector is back, not only once each hour is written again. It returns the bytes cut; errors
// (a read-only disk) are returned joined and leave the files as they are: the partitioner repairs a tail at the
// file's next open for writing too.
func repairRunDir(root string, part *partitioner) (cut int64, err error) {
	var errs []error
	dirs := []string{root}
	for _, stream := range sc.Streams {
		dirs = append(dirs, filepath.Join(root, stream))
		parts, _, lerr := runfiles.ListLayoutPartitions(root, stream)
		if lerr != nil {
			errs = append(errs, lerr)
			continue
		}
		for _, p := range parts {
			if p.Plain == "" {
				continue
			}
			n, rerr := part.repairFile(p.Plain)
			cut += n
			if rerr != nil {
				errs = append(errs, rerr)
			}
		}
	}
	for _, d := range dirs {
		entries, rerr := os.ReadDir(d)
		if rerr != nil {
			if !errors.Is(rerr, os.ErrNotExist) {
				errs = append(errs, rerr)
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".tmp") {
				if rerr := os.Remove(filepath.Join(d, e.Name())); rerr != nil {
					errs = append(errs, rerr)
				}
			}
		}
	}
	return cut, errors.Join(errs...)
}

// repairFile cuts a torn tail of one plain partition file in place.
func (p *partitioner) repairFile(path string) (int64, error) {
	f, err := p.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	before := p.repaired
	if _, err := p.repairTail(f, fi.Size()); err != nil {
		return 0, err
	}
	return p.repaired - before, nil
}

// logStartProblem logs what start-up could not do; the writer's error reporting takes over from here.
func logStartProblem(logger *zap.Logger, what string, err error) {
	logger.Error("jsonl: "+what+"; starting anyway: records are kept in memory (max_buffer_bytes) and written when the disk recovers",
		zap.Error(err))
}
