package store

import "bytes"

// partialLanes is the most lanes a raw gpu_util hour is read for before it is read for all of them: a lane view
// of a 1024-GPU run needs 8 lanes' samples out of ~3.7 M lines an hour, and skipping a line by its node and
// gpu costs a few comparisons where parsing its ~25 fields costs microseconds.
const partialLanes = 64

// laneFilter is a set of lanes by node and GPU index, looked up from a line's bytes without allocating.
type laneFilter struct {
	// nodes are the wanted GPU indices by node.
	nodes map[string][]bool
	// keys are the wanted lanes in the order added.
	keys []laneRef
}

// laneRef is a lane by node and GPU index.
type laneRef struct {
	node string
	gpu  int
}

func newLaneFilter() *laneFilter { return &laneFilter{nodes: map[string][]bool{}} }

func (f *laneFilter) add(node string, gpu int) {
	if gpu < 0 || gpu > 1<<16 || f.has([]byte(node), gpu) {
		return
	}
	g := f.nodes[node]
	for len(g) <= gpu {
		g = append(g, false)
	}
	g[gpu] = true
	f.nodes[node] = g
	f.keys = append(f.keys, laneRef{node, gpu})
}

func (f *laneFilter) has(node []byte, gpu int) bool {
	g := f.nodes[string(node)]
	return gpu >= 0 && gpu < len(g) && g[gpu]
}

// covers says whether a block read with filter f (nil: every lane) holds every lane of want (nil: all).
func (f *laneFilter) covers(want *laneFilter) bool {
	if f == nil {
		return true
	}
	if want == nil {
		return false
	}
	for _, k := range want.keys {
		if !f.has([]byte(k.node), k.gpu) {
			return false
		}
	}
	return true
}

// lineLane reads node and gpu from the start of a gpu_util line as the exporter writes it
// ({"ts":N,"node":"S","gpu":N,…}); ok is false for any other layout (the line is then parsed to find out).
func lineLane(line []byte) (node []byte, gpu int, ok bool) {
	const pre = `{"ts":`
	if !bytes.HasPrefix(line, []byte(pre)) {
		return nil, 0, false
	}
	i := bytes.IndexByte(line[len(pre):], ',')
	if i < 0 {
		return nil, 0, false
	}
	rest := line[len(pre)+i:]
	const nk = `,"node":"`
	if !bytes.HasPrefix(rest, []byte(nk)) {
		return nil, 0, false
	}
	rest = rest[len(nk):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil, 0, false
	}
	node, rest = rest[:j], rest[j+1:]
	const gk = `,"gpu":`
	if !bytes.HasPrefix(rest, []byte(gk)) {
		return nil, 0, false
	}
	rest = rest[len(gk):]
	n, k := 0, 0
	for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' && k < 6 {
		n = n*10 + int(rest[k]-'0')
		k++
	}
	if k == 0 || k >= len(rest) || (rest[k] != ',' && rest[k] != '}') || (k > 1 && rest[0] == '0') {
		return nil, 0, false
	}
	return node, n, true
}
