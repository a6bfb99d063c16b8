package store

import (
	"encoding/json"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The engine catalog's figures of a closed engine_series hour (engHourCatalog: per metric its points and whether
// it is a histogram) are saved in the cache directory once the hour's files are settled, keyed by every file's
// shard, kind, size and mtime as the column cache keys GPU hours (gpu_cache.go): the Metrics page's catalog of a
// reopened run reads none of its engine hours (a 1024-GPU hour takes ≈ 10 s of CPU to read). An hour taken from
// the cache is as one the memory budget dropped: its points are read when a view asks for them.

// engCatalogMagic versions the saved figures.
const engCatalogMagic = "MILESEC1"

// engCatalogMax bounds a saved hour's file (a few hundred metrics).
const engCatalogMax = 4 << 20

// savedEngCatalog is an hour's catalog figures as saved.
type savedEngCatalog struct {
	Magic   string                    `json:"magic"`
	Points  int                       `json:"points"`
	Metrics map[string]savedEngMetric `json:"metrics"`
}

type savedEngMetric struct {
	Points int  `json:"points"`
	Hist   bool `json:"hist"`
}

// engCatalogPath is where hour p's catalog figures are saved ("" without a cache directory), its files stat'ed.
func (s *Store) engCatalogPath(p *partition.Partition, files []cacheFile) string {
	path := s.gpu.cachePath(sc.StreamEngineSeries, p, files)
	if path == "" {
		return ""
	}
	return strings.TrimSuffix(path, ".cols") + ".catalog.json"
}

// cachedEngCatalogLocked is hour p's catalog figures from the cache directory; false when the hour is not
// settled (a file being written or compacted, one read already) or not saved for its files as they are. The
// second result is the hour's files as stat'ed, to save its figures under once read (nil: not cacheable).
func (s *Store) cachedEngCatalogLocked(p *partition.Partition) (engHourCatalog, []cacheFile, bool) {
	files := cacheFiles(p)
	if s.gpu.cacheDir == "" || files == nil || p.Hour < 0 || !stat(files) {
		return engHourCatalog{}, nil, false
	}
	path := s.engCatalogPath(p, files)
	if path == "" {
		return engHourCatalog{}, nil, false
	}
	b, err := runfiles.ReadFileMax(s.gpu.cacheDir, path, engCatalogMax)
	if err != nil {
		return engHourCatalog{}, files, false
	}
	var saved savedEngCatalog
	if json.Unmarshal(b, &saved) != nil || saved.Magic != engCatalogMagic || saved.Metrics == nil {
		return engHourCatalog{}, files, false // another version, or damaged: read again and overwritten
	}
	c := engHourCatalog{metrics: make(map[string]engMetricCount, len(saved.Metrics)), points: saved.Points}
	for m, e := range saved.Metrics {
		c.metrics[m] = engMetricCount{points: e.Points, hist: e.Hist}
	}
	return c, files, true
}

// saveEngCatalogLocked saves hour p's catalog figures c (in the background) when its files, stat'ed before the
// read, are settled as it was read.
func (s *Store) saveEngCatalogLocked(p *partition.Partition, files []cacheFile, c engHourCatalog) {
	if files == nil || !settled(files) {
		return
	}
	path := s.engCatalogPath(p, files)
	if path == "" {
		return
	}
	saved := savedEngCatalog{Magic: engCatalogMagic, Points: c.points, Metrics: make(map[string]savedEngMetric, len(c.metrics))}
	for m, e := range c.metrics {
		saved.Metrics[m] = savedEngMetric{Points: e.points, Hist: e.hist}
	}
	s.saveCachedJSON(path, &saved)
}
