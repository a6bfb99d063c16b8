package dumps

import "fmt"

// The pickle decoder is a data-only interpreter of the pickle opcode stream (opcodes in pickle_opcodes.go, the
// machine in pickle_decoder.go, lazy numeric lists in pickle_numbers.go): it builds Go values for the primitives
// and containers, and for GLOBAL references it consults an allow-list (allowlist.go) of the few callables
// torch/numpy/miles dumps use. An allowed callable is never "called": REDUCE, NEWOBJ and BUILD on it
// run a Go constructor that validates its arguments and returns a plain value (a Tensor descriptor, an NDArray,
// a Dict…). Any other GLOBAL fails the whole load with a ForbiddenError before anything else happens.
//
// Values: nil (None), bool, int64, *big.Int (longs past 64 bits), float64, string, []byte, Tuple, *List, *Dict,
// *Storage, *Tensor, *NDArray, *Object, and allow-listed callables (global). Numeric lists are kept lazily as
// byte spans of the pickle (see List) so a step's per-token lists cost nothing until one sample is read.

// ForbiddenError is returned when a pickle references a callable outside the allow-list.
type ForbiddenError struct{ Module, Name string }

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("refusing to load: the pickle references %s.%s, which is not on the dump reader's allow-list "+
		"(torch tensors and storages, OrderedDict, numpy arrays and scalars, miles samples); it was not executed",
		e.Module, e.Name)
}

// CorruptError is a pickle or archive that cannot be decoded.
type CorruptError struct{ Msg string }

func (e *CorruptError) Error() string { return e.Msg }

func corruptf(format string, a ...any) error { return &CorruptError{fmt.Sprintf(format, a...)} }

// Tuple is a Python tuple.
type Tuple []any

// List is a Python list. A list whose items are all numbers appended by contiguous APPEND/APPENDS opcodes
// keeps no items: it records the byte span of those opcodes in the pickle, re-decoded on demand (NumSpan).
type List struct {
	// Items are the list's values when it is kept eagerly (empty while Span holds it).
	Items []any
	// Span locates the numbers of a lazily kept list in the pickle (zero when Items holds it).
	Span NumSpan
}

// NumSpan locates a lazily kept numeric list inside a pickle: opcodes [Start, End) hold N numbers.
type NumSpan struct {
	// Start and End are byte offsets into the pickle: the opcodes that append the numbers (MARK, number
	// opcodes, APPEND(S), memo writes; see scanNumbers).
	Start, End int
	// N is the number of numbers in the span; 0 means the list is not lazy.
	N int
	// Floats is set when at least one number is a float (else all are ints or bools).
	Floats bool
}

// Len is the number of items.
func (l *List) Len() int {
	if l.Span.N > 0 {
		return l.Span.N
	}
	return len(l.Items)
}

// LazyString is a long string kept as its UTF-8 byte span [Start, End) in the pickle.
type LazyString struct {
	// Start and End are byte offsets into the pickle of the string's UTF-8 bytes.
	Start, End int
}

// Dict is a Python dict (insertion ordered).
type Dict struct {
	// Keys are the keys in insertion order.
	Keys []any
	// Vals are the values, Vals[i] being the value of Keys[i].
	Vals []any
	// idx finds the position of a hashable key (string, int, bool, float, None) in Keys.
	idx map[any]int
}

// Get returns the value of a string key.
func (d *Dict) Get(k string) (any, bool) {
	if d == nil || d.idx == nil {
		return nil, false
	}
	i, ok := d.idx[k]
	if !ok {
		return nil, false
	}
	return d.Vals[i], true
}

func (d *Dict) set(k, v any) {
	switch k.(type) {
	case string, int64, bool, float64, nil:
		if d.idx == nil {
			d.idx = map[any]int{}
		}
		if i, ok := d.idx[k]; ok {
			d.Vals[i] = v
			return
		}
		d.idx[k] = len(d.Keys)
	}
	d.Keys = append(d.Keys, k)
	d.Vals = append(d.Vals, v)
}

// Object is an instance of an allow-listed record class (e.g. a pickled miles Sample): its state, nothing else.
type Object struct {
	// Class is the record's module.name as the pickle named it.
	Class string
	// State is the record's attributes, as BUILD and SETITEMS gave them.
	State *Dict
}

// global is an allow-listed callable or class reference.
type global struct {
	// module and name are the reference as the pickle spelled it.
	module, name string
	// spec is the allow-list entry: what REDUCE, NEWOBJ and BUILD may do with the reference.
	spec *allowed
}

func (g *global) String() string { return g.module + "." + g.name }

// DecodeOptions configure a decode.
type DecodeOptions struct {
	// LazyLists keeps numeric lists as spans (List.Span) instead of items.
	LazyLists bool
	// LazyStrings > 0 keeps strings of at least that many bytes as LazyString spans.
	LazyStrings int
	// PersistentLoad resolves BINPERSID ids (torch storages). Nil refuses them.
	PersistentLoad func(pid any) (any, error)
}

// Decode runs the pickle in b and returns its value.
func Decode(b []byte, opts DecodeOptions) (v any, err error) {
	d := &decoder{
		data: b, memo: map[uint32]any{}, lazyLists: opts.LazyLists, lazyStringMin: opts.LazyStrings,
		persistentLoad: opts.PersistentLoad, lastNonNumeric: -1,
	}
	return d.run()
}
