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
	lanes []*Lane
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

// SelectionError names the term of a lane selection that could not be parsed.
type SelectionError struct{ Term, Reason string }

func (e *SelectionError) Error() string { return fmt.Sprintf("bad lane term %q: %s", e.Term, e.Reason) }

// parseRange reads "5" or "0-7".
func parseRange(s string) (lo, hi int, ok bool) {
	if a, b, found := strings.Cut(s, "-"); found {
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || x < 0 || y < x {
			return 0, 0, false
		}
		return x, y, true
	}
	x, err := strconv.Atoi(s)
	if err != nil || x < 0 {
		return 0, 0, false
	}
	return x, x, true
}

// selectLanes evaluates the selection grammar (docs/dashboard-api.md): a union of terms, in lane order.
// engineRanks maps engine_rank → addr from the topology.
func (ls *laneSet) selectLanes(sel string, engineRanks map[int]string) ([]*Lane, error) {
	sel = strings.TrimSpace(sel)
	if sel == "" {
		sel = "all"
	}
	picked := make([]bool, len(ls.lanes))
	terms := strings.FieldsFunc(sel, func(r rune) bool { return r == ' ' || r == ',' || r == '+' })
	if len(terms) > 256 {
		return nil, &SelectionError{Term: sel[:32] + "…", Reason: "more than 256 terms"}
	}
	for _, term := range terms {
		kind, arg, hasArg := strings.Cut(term, ":")
		switch {
		case term == "all":
			for i := range picked {
				picked[i] = true
			}
		case !hasArg && strings.HasPrefix(term, "g"):
			lo, hi, ok := parseRange(term[1:])
			if !ok {
				return nil, &SelectionError{term, "lane ids are g<N> or g<N>-<M>"}
			}
			for i := lo; i <= hi && i < len(picked); i++ {
				picked[i] = true
			}
		case !hasArg:
			return nil, &SelectionError{term, "expected all, g<N>, or one of rank:, node:, gpu:, engine:, role:, every:"}
		case kind == "rank":
			lo, hi, ok := parseRange(arg)
			if !ok {
				return nil, &SelectionError{term, "rank must be an integer or range"}
			}
			for i, l := range ls.lanes {
				for _, r := range l.Ranks {
					if r >= lo && r <= hi {
						picked[i] = true
					}
				}
			}
		case kind == "gpu":
			lo, hi, ok := parseRange(arg)
			if !ok {
				return nil, &SelectionError{term, "gpu must be an integer or range"}
			}
			for i, l := range ls.lanes {
				if l.GPU >= lo && l.GPU <= hi {
					picked[i] = true
				}
			}
		case kind == "node":
			if arg == "" {
				return nil, &SelectionError{term, "node name missing"}
			}
			for i, l := range ls.lanes {
				if l.Node == arg {
					picked[i] = true
				}
			}
		case kind == "engine":
			addr := arg
			if n, err := strconv.Atoi(arg); err == nil {
				a, ok := engineRanks[n]
				if !ok {
					return nil, &SelectionError{term, "no engine with that rank in the topology"}
				}
				addr = a
			}
			if addr == "" {
				return nil, &SelectionError{term, "engine address or rank missing"}
			}
			for i, l := range ls.lanes {
				for _, e := range l.Engines {
					if e == addr {
						picked[i] = true
					}
				}
			}
		case kind == "role":
			if arg != "train" && arg != "rollout" {
				return nil, &SelectionError{term, "role is train or rollout"}
			}
			for i, l := range ls.lanes {
				for _, r := range l.Roles {
					if r == arg {
						picked[i] = true
					}
				}
			}
		case kind == "every":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return nil, &SelectionError{term, "every needs a positive integer"}
			}
			for i := 0; i < len(picked); i += n {
				picked[i] = true
			}
		default:
			return nil, &SelectionError{term, "unknown term kind " + strconv.Quote(kind)}
		}
	}
	var out []*Lane
	for i, p := range picked {
		if p {
			out = append(out, ls.lanes[i])
		}
	}
	return out, nil
}
