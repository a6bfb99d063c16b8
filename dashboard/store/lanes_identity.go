package store

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// nodeIdentity is the rule that gives every GPU lane one canonical name (docs/semconv.md §1, "Node identity"):
// miles' topology names an engine's node by IP, the emitters and the NVML receiver by host name, so the same GPU
// would otherwise be two lanes (engine lanes apart from GPU lanes).
//
//   - A lane with a GPU UUID is the lane of that UUID: of several keys carrying one UUID, the one whose node an
//     NVML receiver reported (the catalogs' nodes table) wins, else a node named by host name over one named by
//     address, else the smallest key.
//   - A node named by an address is the node that owns the address (the nodes table: host.name → host.ip).
//   - Any other name stands as given.
type nodeIdentity struct {
	// hostOf maps a node address to the host name of the node that owns it.
	hostOf map[string]string
	// hosts are the nodes an NVML receiver reported (the nodes table's keys).
	hosts map[string]bool
	// byUUID maps a GPU UUID to the canonical key of its lane.
	byUUID map[string]string
}

// node is the canonical name of a node: the host name owning the address, or the name as given.
func (n *nodeIdentity) node(name string) string {
	if h, ok := n.hostOf[name]; ok {
		return h
	}
	if i := strings.IndexByte(name, '%'); i > 0 { // an IPv6 zone (fe80::1%eth0) names the same address
		if h, ok := n.hostOf[name[:i]]; ok {
			return h
		}
	}
	return name
}

// key is the canonical key of lane key whose GPU has uuid ("" unknown).
func (n *nodeIdentity) key(key, uuid string) string {
	if k, ok := n.byUUID[uuid]; ok && uuid != "" {
		return k
	}
	node, gpu, ok := splitKey(key)
	if !ok {
		return key
	}
	if c := n.node(node); c != node {
		return c + ":" + itoa(gpu)
	}
	return key
}

// newNodeIdentity builds the rule from the nodes table (host name → its addresses) and every lane known with
// its GPU UUID (lane key → UUID; several sources may name one key).
func newNodeIdentity(nodes map[string][]string, lanes []laneUUID) *nodeIdentity {
	n := &nodeIdentity{hostOf: map[string]string{}, hosts: map[string]bool{}, byUUID: map[string]string{}}
	for _, host := range slices.Sorted(maps.Keys(nodes)) { // the first host listing an address keeps it
		n.hosts[host] = true
		for _, ip := range nodes[host] {
			if _, taken := n.hostOf[ip]; !taken && ip != host {
				n.hostOf[ip] = host
			}
		}
	}
	rank := func(key string) int {
		node, _, _ := splitKey(key)
		switch {
		case n.hosts[node]:
			return 0
		case !isAddr(node):
			return 1
		}
		return 2
	}
	for _, l := range lanes {
		if l.uuid == "" {
			continue
		}
		k := n.key(l.key, "") // by address first: an IP-named lane of a known node is that node's already
		cur, ok := n.byUUID[l.uuid]
		if !ok || rank(k) < rank(cur) || (rank(k) == rank(cur) && k < cur) {
			n.byUUID[l.uuid] = k
		}
	}
	return n
}

// laneUUID is a lane key and the UUID one source gives its GPU.
type laneUUID struct{ key, uuid string }

func isAddr(s string) bool {
	if i := strings.IndexByte(s, '%'); i > 0 {
		s = s[:i]
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// mergeLane folds lane l (another name of the same GPU) into m: the first UUID and model given, the union of
// ranks (sorted), engine addresses (in order of first appearance) and roles (sorted).
func mergeLane(m, l *Lane) {
	m.UUID = cmp.Or(m.UUID, l.UUID)
	m.Model = cmp.Or(m.Model, l.Model)
	for _, r := range l.Ranks {
		if !slices.Contains(m.Ranks, r) {
			m.Ranks = append(m.Ranks, r)
		}
	}
	slices.Sort(m.Ranks)
	for _, a := range l.Engines {
		if !slices.Contains(m.Engines, a) {
			m.Engines = append(m.Engines, a)
		}
	}
	for _, r := range l.Roles {
		if !slices.Contains(m.Roles, r) {
			m.Roles = append(m.Roles, r)
		}
	}
	slices.Sort(m.Roles)
}
