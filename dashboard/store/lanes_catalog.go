package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Lane is one GPU lane ("node:gpu"), the row unit of every view.
type Lane struct {
	ID      string   `json:"id"`
	Key     string   `json:"key"`
	Node    string   `json:"node"`
	GPU     int      `json:"gpu"`
	UUID    string   `json:"uuid,omitempty"`
	Model   string   `json:"model,omitempty"`
	Ranks   []int    `json:"ranks"`
	Engines []string `json:"engines"`
	Roles   []string `json:"roles"`
	idx     int
}

// laneCap is the most lanes a run has: the collector's limit on lane_catalog.json (docs/semconv.md §8.4), also
// applied to the lanes the dashboard learns from the topology and the data.
const laneCap = 1 << 16

// laneKeyMax is the longest lane key kept, in bytes: the collector's name length limit (docs/semconv.md §8.4).
const laneKeyMax = 256

// catalogFile is lane_catalog.json, otelcol-miles (version 2) or miles v1: v2 is a superset.
type catalogFile struct {
	Lanes map[string]struct {
		UUID        string   `json:"uuid"`
		Model       string   `json:"model"`
		Ranks       []int    `json:"ranks"`
		EngineAddrs []string `json:"engine_addrs"`
		Roles       []string `json:"roles"`
	} `json:"lanes"`
}

// laneSet is an immutable, ordered set of lanes; replaced as a whole when the catalog changes.
type laneSet struct {
	// lanes are the lanes in display order.
	lanes []*Lane
	// byKey are the lanes by key ("node:gpu").
	byKey map[string]*Lane
}

func splitKey(k string) (string, int, bool) {
	i := strings.LastIndexByte(k, ':')
	if i <= 0 {
		return "", 0, false
	}
	g, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return "", 0, false
	}
	return k[:i], g, true
}

func loadCatalog(path string) (map[string]*Lane, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f catalogFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]*Lane{}
	for k, v := range f.Lanes {
		node, gpu, ok := splitKey(k)
		if !ok {
			continue
		}
		out[k] = &Lane{Key: k, Node: node, GPU: gpu, UUID: v.UUID, Model: v.Model, Ranks: nz(v.Ranks), Engines: nz(v.EngineAddrs), Roles: nz(v.Roles)}
	}
	return out, nil
}

func nz[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// newLaneSet orders lanes by node (IPv4 numerically, else natural order so sim-node-2 < sim-node-10), then GPU,
// and numbers them g0, g1, ….
func newLaneSet(m map[string]*Lane) *laneSet {
	ls := &laneSet{byKey: map[string]*Lane{}}
	for _, l := range m {
		ls.lanes = append(ls.lanes, l)
	}
	sort.Slice(ls.lanes, func(i, j int) bool {
		a, b := ls.lanes[i], ls.lanes[j]
		if a.Node != b.Node {
			return nodeLess(a.Node, b.Node)
		}
		return a.GPU < b.GPU
	})
	for i, l := range ls.lanes {
		l.idx = i
		l.ID = "g" + strconv.Itoa(i)
		ls.byKey[l.Key] = l
	}
	return ls
}

func nodeLess(a, b string) bool {
	pa, ea := netip.ParseAddr(a)
	pb, eb := netip.ParseAddr(b)
	if ea == nil && eb == nil {
		return pa.Less(pb)
	}
	if (ea == nil) != (eb == nil) {
		return ea == nil // addresses before names
	}
	return naturalLess(a, b)
}

// naturalLess compares strings with digit runs compared as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(strings.TrimLeft(a[:da], "0")+"0", 10, 64)
			nb, _ := strconv.ParseUint(strings.TrimLeft(b[:db], "0")+"0", 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && n < 18 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
