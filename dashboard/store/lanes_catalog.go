package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
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

// laneSet is an immutable, ordered set of lanes; replaced as a whole when the catalog changes.
type laneSet struct {
	// lanes are the lanes in display order.
	lanes []*Lane
	// byKey are the lanes by key ("node:gpu"), the other names of a lane's GPU (nodeIdentity) included.
	byKey map[string]*Lane
	// ids is the node identity the lanes were named by (never nil).
	ids *nodeIdentity
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

// catalogEntry is one lane of lane_catalog.json.
type catalogEntry struct {
	UUID        string   `json:"uuid"`
	Model       string   `json:"model"`
	Ranks       []int    `json:"ranks"`
	EngineAddrs []string `json:"engine_addrs"`
	Roles       []string `json:"roles"`
}

// catalogSkips counts the catalog's lanes left out: over laneCap (the catalog is not read past it), or with a
// key over laneKeyMax bytes.
type catalogSkips struct {
	overCap bool
	longKey int
}

// catalogNodes is the catalog's nodes table (docs/semconv.md §8.2): each host name an NVML receiver reported,
// with the addresses it gave (host.ip).
type catalogNodes map[string][]string

// nodeEntry is one node of the nodes table.
type nodeEntry struct {
	IPs []string `json:"ips"`
}

// maxNodeIPs bounds the addresses read per node, and catalogNodesMax the nodes: the lane limits' scale.
const (
	maxNodeIPs      = 64
	catalogNodesMax = 1 << 12
)

// readNodes reads the nodes table, leaving out names over laneKeyMax bytes and what is over the bounds.
func readNodes(dec *json.Decoder, out catalogNodes) error {
	var m map[string]nodeEntry
	if err := dec.Decode(&m); err != nil {
		return err
	}
	for _, host := range slices.Sorted(maps.Keys(m)) {
		if len(out) >= catalogNodesMax || host == "" || len(host) > laneKeyMax {
			continue
		}
		for _, ip := range m[host].IPs {
			if ip != "" && len(ip) <= laneKeyMax && len(out[host]) < maxNodeIPs && !slices.Contains(out[host], ip) {
				out[host] = append(out[host], ip)
			}
		}
		if out[host] == nil {
			out[host] = []string{}
		}
	}
	return nil
}

// loadCatalog reads lane_catalog.json as a stream, one lane at a time, and stops at laneCap lanes: a catalog
// written before the collector's ingest limits may hold a million lanes (one span listing 2^20 GPU ids), which
// read whole took seconds and gigabytes at every start and made every view that many lanes wide. The file is
// opened under runDir: a link out of the run is not followed (runfiles.ErrOutsideRun).
func loadCatalog(runDir, path string) (map[string]*Lane, catalogNodes, catalogSkips, error) {
	var skips catalogSkips
	f, err := runfiles.Open(runDir, path)
	if err != nil {
		return nil, nil, skips, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	bad := func(err error) (map[string]*Lane, catalogNodes, catalogSkips, error) {
		return nil, nil, skips, fmt.Errorf("%s: %w", path, err)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return bad(err)
	}
	out := map[string]*Lane{}
	nodes := catalogNodes{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		if k, _ := tok.(string); k == "nodes" {
			if err := readNodes(dec, nodes); err != nil {
				return bad(err)
			}
			continue
		}
		if k, _ := tok.(string); k != "lanes" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad(err)
			}
			continue
		}
		if err := expectDelim(dec, '{'); err != nil {
			return bad(err)
		}
		for dec.More() {
			if len(out) >= laneCap {
				skips.overCap = true
				return out, nodes, skips, nil
			}
			tok, err := dec.Token()
			if err != nil {
				return bad(err)
			}
			k, _ := tok.(string)
			var v catalogEntry
			if err := dec.Decode(&v); err != nil {
				return bad(err)
			}
			if len(k) > laneKeyMax {
				skips.longKey++
				continue
			}
			node, gpu, ok := splitKey(k)
			if !ok {
				continue
			}
			out[k] = &Lane{Key: k, Node: node, GPU: gpu, UUID: v.UUID, Model: v.Model, Ranks: nz(v.Ranks), Engines: nz(v.EngineAddrs), Roles: nz(v.Roles)}
		}
		if _, err := dec.Token(); err != nil { // the lanes' closing brace
			return bad(err)
		}
	}
	return out, nodes, skips, nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("expected %q, found %v", d, tok)
	}
	return nil
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
	ls := &laneSet{byKey: map[string]*Lane{}, ids: newNodeIdentity(nil, nil)}
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
