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

	// lastSeen is when a record last named the lane (the start, for a lane read back from the file); client is
	// the peer address that added it ("" unknown). Neither is written: a full catalog drops the lanes idle
	// longest (evictIdle) and gives their client its share back.
	lastSeen time.Time
	client   string
}

type catalogFile struct {
	Version int                   `json:"version"`
	Lanes   map[string]*laneEntry `json:"lanes"`
	// Nodes is the nodes table: each host.name a GPU resource gave, with its host.ip addresses
	// (docs/semconv.md §1 "Node identity", §8.2).
	Nodes map[string]*nodeEntry `json:"nodes,omitempty"`
}

// nodeEntry is one node of the nodes table.
type nodeEntry struct {
	IPs []string `json:"ips"`
}

// maxNodeIPs bounds the addresses kept per node, maxNodes the nodes (the lane limit's 1024 nodes, 4×).
const (
	maxNodeIPs = 64
	maxNodes   = 4096
)

// laneFact is one thing learned about a GPU lane ("node:gpu") while mapping records; the catalog folds them.
type laneFact struct {
	node   string
	gpu    int64
	uuid   string
	model  string
	rank   int64 // -1 none
	train  bool
	engine string   // engine addr, "" none
	ips    []string // the node's addresses (host.ip of a GPU resource)
}

// laneCatalog folds lane facts from every export into lane_catalog.json so readers never scan streams to
// resolve lanes. Export calls fold under the lock; the flush goroutine writes the file when it changed.
type laneCatalog struct {
	mu    sync.Mutex
	path  string
	lanes map[string]*laneEntry
	nodes map[string][]string // host name → addresses, in order of first appearance
	dirty bool
	// byClient counts the lanes each client (peer address) has in the catalog, bounded by maxLanesPerClient;
	// at most one entry per lane, so bounded with the catalog.
	byClient map[string]int
	// lastEvict is when a full catalog was last searched for idle lanes (laneEvictEvery).
	lastEvict time.Time
}

func newLaneCatalog(dashDir string) *laneCatalog {
	return &laneCatalog{path: filepath.Join(dashDir, runfiles.LaneCatalogFile), lanes: map[string]*laneEntry{}, nodes: map[string][]string{}}
}

// load merges an existing catalog (collector restart) so lanes learned before are kept, each as seen at now.
// skipped counts the lanes over the ingest limits it left out.
func (c *laneCatalog) load(now time.Time) (skipped int, err error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f catalogFile
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("%s is not a lane catalog (it will be rewritten): %w", c.path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A catalog written before the ingest limits (docs/semconv.md §8.4) may hold lanes no collector writes now:
	// they are dropped and the file rewritten at the next flush, so a poisoned run directory heals on restart.
	for k, v := range f.Lanes {
		if v == nil || !validLaneKey(k) || len(c.lanes) >= maxLanes {
			skipped++
			continue
		}
		v.lastSeen = now
		c.lanes[k] = v
	}
	for host, n := range f.Nodes {
		if n != nil {
			c.addNode(host, n.IPs)
		}
	}
	c.dirty = skipped > 0
	return skipped, nil
}

// addNode learns addresses of node host (bounded, names over the name limit left out); true when it learned
// something. The caller holds mu.
func (c *laneCatalog) addNode(host string, ips []string) bool {
	if host == "" || len(host) > maxNameBytes {
		return false
	}
	known, ok := c.nodes[host]
	if !ok && len(c.nodes) >= maxNodes {
		return false
	}
	changed := !ok
	for _, ip := range ips {
		if ip != "" && len(ip) <= maxNameBytes && len(known) < maxNodeIPs && !slices.Contains(known, ip) {
			known, changed = append(known, ip), true
		}
	}
	if known == nil {
		known = []string{}
	}
	c.nodes[host] = known
	return changed
}

func addSorted[T int64 | string](s []T, v T) ([]T, bool) {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s, false
	}
	return slices.Insert(s, i, v), true
}

// fold learns the facts of one export at now. It returns how many facts named a new lane while the catalog
// already held maxLanes lanes none of which was idle (refused: the catalog stays bounded whatever clients send;
// their records are still written), and how many idle lanes it dropped to make room.
func (c *laneCatalog) fold(facts []laneFact, now time.Time) (refused, evicted int64) {
	return c.foldFrom(facts, "", now)
}

// foldFrom is fold for the facts of one client (its peer address; "" an unknown one, unbounded), which may hold
// at most maxLanesPerClient lanes: past it its new lanes are refused too, so one client cannot fill the catalog
// for the others; a full catalog drops the lanes idle for laneIdleEvict, so clients from many addresses cannot
// fill it for good either (docs/semconv.md §8.4).
func (c *laneCatalog) foldFrom(facts []laneFact, client string, now time.Time) (refused, evicted int64) {
	if len(facts) == 0 {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range facts {
		if len(f.ips) > 0 && c.addNode(f.node, f.ips) {
			c.dirty = true
		}
		key := f.node + ":" + strconv.FormatInt(f.gpu, 10)
		e := c.lanes[key]
		if e == nil {
			if len(c.lanes) >= maxLanes && now.Sub(c.lastEvict) >= laneEvictEvery {
				c.lastEvict = now
				evicted += c.evictIdle(now)
			}
			if len(c.lanes) >= maxLanes || (client != "" && c.byClient[client] >= maxLanesPerClient) {
				refused++
				continue
			}
			if client != "" {
				if c.byClient == nil {
					c.byClient = map[string]int{}
				}
				c.byClient[client]++
			}
			e = &laneEntry{Ranks: []int64{}, EngineAddrs: []string{}, Roles: []string{}, client: client}
			c.lanes[key] = e
			c.dirty = true
		}
		e.lastSeen = now
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
	return refused, evicted
}

// evictIdle drops the lanes no record has named for laneIdleEvict and returns how many. The caller holds mu.
func (c *laneCatalog) evictIdle(now time.Time) (n int64) {
	for k, e := range c.lanes {
		if now.Sub(e.lastSeen) < laneIdleEvict {
			continue
		}
		delete(c.lanes, k)
		if e.client != "" {
			c.byClient[e.client]--
			if c.byClient[e.client] <= 0 {
				delete(c.byClient, e.client)
			}
		}
		n++
	}
	if n > 0 {
		c.dirty = true
	}
	return n
}

// writeIfChanged rewrites the catalog atomically when something new was learned since the last write.
func (c *laneCatalog) writeIfChanged() error {
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return nil
	}
	nodes := make(map[string]*nodeEntry, len(c.nodes))
	for h, ips := range c.nodes {
		nodes[h] = &nodeEntry{IPs: ips}
	}
	b, err := json.Marshal(catalogFile{Version: 2, Lanes: c.lanes, Nodes: nodes})
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
	// Shard is the writing gateway's shard id; absent in an unsharded layout (docs/semconv.md §8.1).
	Shard string `json:"shard,omitempty"`
}

// writeMeta creates meta.json at the first start and appends the start time on every later one, keeping
// the run's name and start so a resumed run reads as one.
func writeMeta(dashDir, runName, shard, version string, now time.Time) error {
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
	m.Shard = shard
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
		_ = os.Remove(tmp) // a full disk leaves it created but empty
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
