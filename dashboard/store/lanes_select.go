package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Lanes resolves a selection.
func (s *Store) Lanes(sel string) ([]*Lane, int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, err := s.lanes.set.selectLanes(sel, s.topology.engineRanksLocked())
	return l, len(s.lanes.set.lanes), err
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
// engineRanks maps engine_rank → every address the rank had in the topology.
func (ls *laneSet) selectLanes(sel string, engineRanks map[int][]string) ([]*Lane, error) {
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
		case (!hasArg && strings.HasPrefix(term, "g")) || kind == "g":
			// g3 (our lane ids) or g:3 (the reference dashboard's spelling of the same index)
			idx := term[1:]
			if hasArg {
				idx = arg
			}
			lo, hi, ok := parseRange(idx)
			if !ok {
				return nil, &SelectionError{term, "lane ids are g<N>, g<N>-<M>, g:<N> or g:<N>-<M>"}
			}
			for i := lo; i <= hi && i < len(picked); i++ {
				picked[i] = true
			}
		case !hasArg:
			return nil, &SelectionError{term, "expected all, g<N>, or one of g:, rank:, node:, gpu:, engine:, role:, every:"}
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
			// gpu:3 (that index on every node) or gpu:<node>:<index> (one node's: split at the last colon, so
			// a node name may hold colons)
			node, idx, oneNode := "", arg, false
			if i := strings.LastIndexByte(arg, ':'); i >= 0 {
				node, idx, oneNode = arg[:i], arg[i+1:], true
				if node == "" {
					return nil, &SelectionError{term, "node name missing"}
				}
			}
			lo, hi, ok := parseRange(idx)
			if !ok {
				return nil, &SelectionError{term, "gpu must be an integer or range, or <node>:<index>"}
			}
			node = ls.ids.node(node) // a node may be named by any of its names (nodeIdentity)
			for i, l := range ls.lanes {
				if l.GPU >= lo && l.GPU <= hi && (!oneNode || l.Node == node) {
					picked[i] = true
				}
			}
		case kind == "node":
			if arg == "" {
				return nil, &SelectionError{term, "node name missing"}
			}
			node := ls.ids.node(arg)
			for i, l := range ls.lanes {
				if l.Node == node {
					picked[i] = true
				}
			}
		case kind == "engine":
			// An integer is an engine rank: every address it had. Anything else matches the lanes any of whose
			// engines' addresses contains it (the reference dashboard's substring match; a whole address is one).
			if arg == "" {
				return nil, &SelectionError{term, "engine address or rank missing"}
			}
			match := func(e string) bool { return strings.Contains(e, arg) }
			if n, err := strconv.Atoi(arg); err == nil {
				addrs, ok := engineRanks[n]
				if !ok || len(addrs) == 0 {
					return nil, &SelectionError{term, "no engine with that rank in the topology"}
				}
				match = func(e string) bool { return slices.Contains(addrs, e) }
			}
			for i, l := range ls.lanes {
				for _, e := range l.Engines {
					if match(e) {
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
