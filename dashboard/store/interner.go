package store

import "math"

// interner maps short strings (engine addresses, statuses) to small integers; index 0 is "".
type interner struct {
	// ids maps a string to its integer.
	ids map[string]uint16
	// strings maps an integer to its string.
	strings []string
}

func (in *interner) init() {
	in.ids = map[string]uint16{"": 0}
	in.strings = []string{""}
}

func (in *interner) id(b []byte) uint16 {
	if len(b) == 0 {
		return 0
	}
	if i, ok := in.ids[string(b)]; ok {
		return i
	}
	n := len(in.strings)
	if n >= math.MaxUint16 {
		return 0 // absurd cardinality: keep the record, drop the string
	}
	s := string(b)
	i := uint16(n)
	in.ids[s] = i
	in.strings = append(in.strings, s)
	return i
}

func (in *interner) str(i uint16) string {
	if int(i) < len(in.strings) {
		return in.strings[i]
	}
	return ""
}

// idsIn maps each of in's ids to the id of the same string in to (interning it there): a read interns into an
// interner of its own, and its records take the reader's ids when the read is applied.
func (in *interner) idsIn(to *interner) []uint16 {
	ids := make([]uint16, len(in.strings))
	for i, str := range in.strings {
		ids[i] = to.id([]byte(str))
	}
	return ids
}
