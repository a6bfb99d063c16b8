package store

import "math"

// interner maps short strings (engine addresses, statuses) to small integers; index 0 is "".
type interner struct {
	idx  map[string]uint16
	strs []string
}

func (in *interner) init() {
	in.idx = map[string]uint16{"": 0}
	in.strs = []string{""}
}

func (in *interner) id(b []byte) uint16 {
	if len(b) == 0 {
		return 0
	}
	if i, ok := in.idx[string(b)]; ok {
		return i
	}
	if len(in.strs) >= math.MaxUint16 {
		return 0 // absurd cardinality: keep the record, drop the string
	}
	s := string(b)
	i := uint16(len(in.strs))
	in.idx[s] = i
	in.strs = append(in.strs, s)
	return i
}

func (in *interner) str(i uint16) string {
	if int(i) < len(in.strs) {
		return in.strs[i]
	}
	return ""
}
