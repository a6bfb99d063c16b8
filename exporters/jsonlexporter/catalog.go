package jsonlexporter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// laneEntry is one GPU lane of lane_catalog.json (docs/semconv.md §8.2).
type laneEntry struct {
	UUID        string   `json:"uuid,omitempty"`
	Model       string   `json:"model,omitempty"`
	Ranks       []int64  `json:"ranks"`
	EngineAddrs []string `json:"engine_addrs"`
	Roles       []string `json:"roles"`
}

type catalogFile struct {
	Version int                   `json:"version"`
	Lanes   map[string]*laneEntry `json:"lanes"`
}

// laneCatalog folds lane facts from every export into lane_catalog.json so readers never scan streams to
// resolve lanes. Export calls fold under the lock; the flush goroutine writes the file when it changed.
type laneCatalog struct {
	mu    sync.Mutex
	path  string
	lanes map[string]*laneEntry
	dirty bool
}

func newLaneCatalog(dashDir string) *laneCatalog {
	return &laneCatalog{path: filepath.Join(dashDir, runfiles.LaneCatalogFile), lanes: map[string]*laneEntry{}}
}

// load merges an existing catalog (collector restart) so lanes learned before are kept.
func (c *laneCatalog) load() error {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var f catalogFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s is not a lane catalog (it will be rewritten): %w", c.path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range f.Lanes {
		if v != nil {
			c.lanes[k] = v
		}
	}
	return nil
}

func addSorted[T int64 | string](s []T, v T) ([]T, bool) {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s, false
	}
	return slices.Insert(s, i, v), true
}

func (c *laneCatalog) fold(facts []laneFact) {
	if len(facts) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range facts {
		key := f.node + ":" + strconv.FormatInt(f.gpu, 10)
		e := c.lanes[key]
		if e == nil {
			e = &laneEntry{Ranks: []int64{}, EngineAddrs: []string{}, Roles: []string{}}
			c.lanes[key] = e
			c.dirty = true
		}
		var changed bool
		if f.uuid != "" && e.UUID != f.uuid {
			e.UUID, c.dirty = f.uuid, true
		}
		if f.model != "" && e.Model != f.model {
			e.Model, c.dirty = f.model, true
		}
		if f.train {
			e.Roles, changed = addSorted(e.Roles, "train")
			c.dirty = c.dirty || changed
			if f.rank >= 0 {
				e.Ranks, changed = addSorted(e.Ranks, f.rank)
				c.dirty = c.dirty || changed
			}
		}
		if f.engine != "" {
			e.Roles, changed = addSorted(e.Roles, "rollout")
			c.dirty = c.dirty || changed
			e.EngineAddrs, changed = addSorted(e.EngineAddrs, f.engine)
			c.dirty = c.dirty || changed
		}
	}
}

// writeIfChanged rewrites the catalog atomically when something new was learned since the last write.
func (c *laneCatalog) writeIfChanged() error {
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return nil
	}
	b, err := json.Marshal(catalogFile{Version: 2, Lanes: c.lanes})
	c.dirty = false
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := writeAtomic(c.path, b); err != nil {
		c.mu.Lock()
		c.dirty = true // try again next flush
		c.mu.Unlock()
		return err
	}
	return nil
}

// runMeta is meta.json (docs/semconv.md §8.1).
type runMeta struct {
	SchemaVersion int       `json:"schema_version"`
	Writer        string    `json:"writer"`
	WriterVersion string    `json:"writer_version"`
	RunName       string    `json:"run_name"`
	StartTS       float64   `json:"start_ts"`
	Starts        []float64 `json:"starts"`
}

// writeMeta creates meta.json at the first start and appends the start time on every later one, keeping
// the run's name and start so a resumed run reads as one.
func writeMeta(dashDir, runName, version string, now time.Time) error {
	path := filepath.Join(dashDir, runfiles.MetaFile)
	ts := float64(now.UnixMicro()) / 1e6
	m := runMeta{RunName: runName, StartTS: ts}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &m) // a corrupt meta.json is replaced, keeping what could be read
		if m.StartTS == 0 {
			m.StartTS = ts
		}
		if m.RunName == "" {
			m.RunName = runName
		}
	}
	m.SchemaVersion = sc.SchemaVersion
	m.Writer = "otelcol-miles"
	m.WriterVersion = version
	m.Starts = append(m.Starts, ts)
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
