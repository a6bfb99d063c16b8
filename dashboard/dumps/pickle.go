package dumps

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The pickle decoder is a data-only interpreter of the pickle opcode stream: it builds Go values for the
// primitives and containers, and for GLOBAL references it consults an allow-list (allowlist.go) of the few
// callables torch/numpy/miles dumps use. An allowed callable is never "called": REDUCE, NEWOBJ and BUILD on it
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
	Items []any
	Span  NumSpan
}

// NumSpan locates a lazily kept numeric list inside a pickle: opcodes [Start, End) hold N numbers.
type NumSpan struct {
	Start, End int
	N          int
	Floats     bool // at least one float (else all ints/bools)
}

// Len is the number of items.
func (l *List) Len() int {
	if l.Span.N > 0 {
		return l.Span.N
	}
	return len(l.Items)
}

// LazyString is a long string kept as its UTF-8 byte span [Start, End) in the pickle.
type LazyString struct{ Start, End int }

// Dict is a Python dict (insertion ordered).
type Dict struct {
	Keys []any
	Vals []any
	idx  map[any]int
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
	Class string
	State *Dict
}

// global is an allow-listed callable or class reference.
type global struct {
	module, name string
	spec         *allowed
}

func (g *global) String() string { return g.module + "." + g.name }

type mark struct {
	stack int // stack length at MARK
	off   int // byte offset of the MARK opcode
}

// Limits bound what a pickle may make the decoder hold.
const (
	maxStack = 1 << 22 // values on the stack at once
	maxMarks = 1 << 12 // nesting depth
	maxMemo  = 1 << 22 // memo entries
)

type decoder struct {
	b       []byte
	pos     int
	stack   []any
	soff    []int // opcode offset that pushed each stack value
	marks   []mark
	memo    map[uint32]any
	lazy    bool
	lazyStr int
	pload   func(pid any) (any, error)
	pure    int // offset of the last opcode that was not a plain number/memo/mark
	frames  int
}

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
	d := &decoder{b: b, memo: map[uint32]any{}, lazy: opts.LazyLists, lazyStr: opts.LazyStrings, pload: opts.PersistentLoad, pure: -1}
	return d.run()
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || d.pos+n > len(d.b) || d.pos+n < d.pos {
		return nil, corruptf("pickle truncated at byte %d (need %d more bytes, have %d)", d.pos, n, len(d.b)-d.pos)
	}
	s := d.b[d.pos : d.pos+n]
	d.pos += n
	return s, nil
}

func (d *decoder) line() (string, error) {
	for i := d.pos; i < len(d.b); i++ {
		if d.b[i] == '\n' {
			s := string(d.b[d.pos:i])
			d.pos = i + 1
			return s, nil
		}
	}
	return "", corruptf("pickle truncated at byte %d: unterminated line", d.pos)
}

func (d *decoder) push(v any, off int) error {
	if len(d.stack) >= maxStack {
		return corruptf("pickle stack exceeds %d values", maxStack)
	}
	d.stack = append(d.stack, v)
	d.soff = append(d.soff, off)
	return nil
}

func (d *decoder) pop() (any, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1].stack == n) {
		return nil, corruptf("pickle stack underflow at byte %d", d.pos)
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	d.soff = d.soff[:n-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1].stack == n) {
		return nil, corruptf("pickle stack empty at byte %d", d.pos)
	}
	return d.stack[n-1], nil
}

// popMark pops everything since the last MARK.
func (d *decoder) popMark() ([]any, mark, error) {
	if len(d.marks) == 0 {
		return nil, mark{}, corruptf("pickle: no MARK before byte %d", d.pos)
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := append([]any(nil), d.stack[m.stack:]...)
	d.stack = d.stack[:m.stack]
	d.soff = d.soff[:m.stack]
	return items, m, nil
}

func (d *decoder) memoPut(i uint32) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	if _, ok := d.memo[i]; !ok && len(d.memo) >= maxMemo {
		return corruptf("pickle memo exceeds %d entries", maxMemo)
	}
	d.memo[i] = v
	return nil
}

func (d *decoder) memoGet(i uint32, off int) error {
	v, ok := d.memo[i]
	if !ok {
		return corruptf("pickle: memo key %d missing at byte %d", i, off)
	}
	return d.push(v, off)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64, bool:
		return true
	}
	return false
}

// appendItems appends items (pushed by opcodes [start, end)) to l, lazily when they are all plain numbers.
func (d *decoder) appendItems(l *List, items []any, start, end int) error {
	if d.lazy && len(l.Items) == 0 && d.pure < start && (l.Span.N == 0 || l.Span.End == start) {
		allNum := true
		floats := false
		for _, it := range items {
			switch it.(type) {
			case int64, bool:
			case float64:
				floats = true
			default:
				allNum = false
			}
			if !allNum {
				break
			}
		}
		if allNum && len(items) > 0 {
			if l.Span.N == 0 {
				l.Span.Start = start
			}
			l.Span.End = end
			l.Span.N += len(items)
			l.Span.Floats = l.Span.Floats || floats
			return nil
		}
	}
	if l.Span.N > 0 { // a lazy list gets a non-number or a non-contiguous append: materialize it
		vals, err := decodeNumbers(d.b[l.Span.Start:l.Span.End], l.Span.N)
		if err != nil {
			return err
		}
		l.Items = vals
		l.Span = NumSpan{}
	}
	l.Items = append(l.Items, items...)
	return nil
}

// decodeNumbers re-decodes a numeric span into boxed values (the eager fallback).
func decodeNumbers(b []byte, n int) ([]any, error) {
	out := make([]any, 0, n)
	err := scanNumbers(b, func(i int64, f float64, isF bool) {
		if isF {
			out = append(out, f)
		} else {
			out = append(out, i)
		}
	})
	return out, err
}

// scanNumbers walks a numeric span: number opcodes call fn; MARK, APPEND(S), PUT and MEMOIZE are skipped.
func scanNumbers(b []byte, fn func(i int64, f float64, isF bool)) error {
	p := 0
	for p < len(b) {
		op := b[p]
		p++
		need := func(n int) bool { return p+n <= len(b) }
		switch op {
		case 'K':
			if !need(1) {
				return corruptf("numeric span truncated")
			}
			fn(int64(b[p]), 0, false)
			p++
		case 'M':
			if !need(2) {
				return corruptf("numeric span truncated")
			}
			fn(int64(binary.LittleEndian.Uint16(b[p:])), 0, false)
			p += 2
		case 'J':
			if !need(4) {
				return corruptf("numeric span truncated")
			}
			fn(int64(int32(binary.LittleEndian.Uint32(b[p:]))), 0, false)
			p += 4
		case 'G':
			if !need(8) {
				return corruptf("numeric span truncated")
			}
			fn(0, math.Float64frombits(binary.BigEndian.Uint64(b[p:])), true)
			p += 8
		case 0x8a: // LONG1
			if !need(1) {
				return corruptf("numeric span truncated")
			}
			n := int(b[p])
			p++
			if !need(n) || n > 8 {
				return corruptf("numeric span: bad LONG1")
			}
			fn(leSigned(b[p:p+n]), 0, false)
			p += n
		case 0x88:
			fn(1, 0, false)
		case 0x89:
			fn(0, 0, false)
		case '(', 'e', 'a', 0x94:
		case 'q':
			p++
		case 'r':
			p += 4
		default:
			return corruptf("numeric span: unexpected opcode 0x%02x", op)
		}
	}
	if p != len(b) {
		return corruptf("numeric span truncated")
	}
	return nil
}

func leSigned(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if len(b) < 8 && b[len(b)-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * uint(len(b)))
	}
	return int64(u)
}

func decodeLong(b []byte) any {
	if len(b) <= 8 {
		return leSigned(b)
	}
	// little-endian two's complement → big.Int
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if x.IsInt64() {
		return x.Int64()
	}
	return x
}

func (d *decoder) run() (any, error) {
	for {
		off := d.pos
		if d.pos >= len(d.b) {
			return nil, corruptf("pickle truncated: no STOP opcode (%d bytes)", len(d.b))
		}
		op := d.b[d.pos]
		d.pos++
		numeric := false
		var err error
		switch op {
		case 0x80: // PROTO
			var p []byte
			if p, err = d.need(1); err == nil && p[0] > 5 {
				err = corruptf("unsupported pickle protocol %d", p[0])
			}
			numeric = true
		case 0x95: // FRAME
			_, err = d.need(8)
			d.frames++
			numeric = true
		case '.': // STOP
			v, err := d.pop()
			if err != nil {
				return nil, err
			}
			return v, nil
		case '(':
			if d.lazy && d.fastAppends(off) {
				numeric = true
				break
			}
			if len(d.marks) >= maxMarks {
				return nil, corruptf("pickle nests deeper than %d", maxMarks)
			}
			d.marks = append(d.marks, mark{len(d.stack), off})
			numeric = true
		case '0': // POP
			if len(d.marks) > 0 && d.marks[len(d.marks)-1].stack == len(d.stack) {
				_, _, err = d.popMark()
			} else {
				_, err = d.pop()
			}
		case '1': // POP_MARK
			_, _, err = d.popMark()
		case '2': // DUP
			var v any
			if v, err = d.top(); err == nil {
				err = d.push(v, off)
			}
		case 'N':
			err = d.push(nil, off)
		case 0x88:
			err = d.push(true, off)
			numeric = true
		case 0x89:
			err = d.push(false, off)
			numeric = true
		case 'K':
			var p []byte
			if p, err = d.need(1); err == nil {
				err = d.push(int64(p[0]), off)
			}
			numeric = true
		case 'M':
			var p []byte
			if p, err = d.need(2); err == nil {
				err = d.push(int64(binary.LittleEndian.Uint16(p)), off)
			}
			numeric = true
		case 'J':
			var p []byte
			if p, err = d.need(4); err == nil {
				err = d.push(int64(int32(binary.LittleEndian.Uint32(p))), off)
			}
			numeric = true
		case 0x8a, 0x8b: // LONG1, LONG4
			var p []byte
			n := 0
			if op == 0x8a {
				if p, err = d.need(1); err == nil {
					n = int(p[0])
				}
			} else if p, err = d.need(4); err == nil {
				n = int(int32(binary.LittleEndian.Uint32(p)))
			}
			if err == nil {
				if n > 1<<16 {
					err = corruptf("pickle LONG of %d bytes", n)
				} else if p, err = d.need(n); err == nil {
					v := decodeLong(p)
					err = d.push(v, off)
					_, numeric = v.(int64)
					numeric = numeric && op == 0x8a
				}
			}
		case 'G':
			var p []byte
			if p, err = d.need(8); err == nil {
				err = d.push(math.Float64frombits(binary.BigEndian.Uint64(p)), off)
			}
			numeric = true
		case 'I', 'L', 'F': // INT, LONG, FLOAT (text)
			var s string
			if s, err = d.line(); err == nil {
				err = d.pushText(op, s, off)
			}
		case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
			var n int
			if n, err = d.length(op); err == nil {
				start := d.pos
				var p []byte
				if p, err = d.need(n); err == nil {
					if d.lazyStr > 0 && n >= d.lazyStr {
						err = d.push(LazyString{Start: start, End: start + n}, off)
					} else {
						err = d.push(pyString(p), off)
					}
				}
			}
		case 'V': // UNICODE (raw-unicode-escape, text)
			var s string
			if s, err = d.line(); err == nil {
				err = d.push(rawUnicodeEscape(s), off)
			}
		case 'T', 'U': // BINSTRING, SHORT_BINSTRING (py2 str: bytes)
			var n int
			if n, err = d.length(op); err == nil {
				var p []byte
				if p, err = d.need(n); err == nil {
					err = d.push(string(p), off)
				}
			}
		case 'S': // STRING (text, quoted)
			var s string
			if s, err = d.line(); err == nil {
				var u string
				if u, err = strconv.Unquote(s); err != nil {
					if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
						u, err = s[1:len(s)-1], nil
					} else {
						err = corruptf("pickle: bad STRING at byte %d", off)
					}
				}
				if err == nil {
					err = d.push(u, off)
				}
			}
		case 'B', 'C', 0x8e, 0x96: // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
			var n int
			if n, err = d.length(op); err == nil {
				var p []byte
				if p, err = d.need(n); err == nil {
					err = d.push(append([]byte(nil), p...), off)
				}
			}
		case ')':
			err = d.push(Tuple{}, off)
		case 0x85, 0x86, 0x87: // TUPLE1..3
			n := int(op - 0x84)
			if len(d.stack) < n || (len(d.marks) > 0 && d.marks[len(d.marks)-1].stack > len(d.stack)-n) {
				return nil, corruptf("pickle stack underflow at byte %d", off)
			}
			t := append(Tuple(nil), d.stack[len(d.stack)-n:]...)
			d.stack = d.stack[:len(d.stack)-n]
			d.soff = d.soff[:len(d.soff)-n]
			err = d.push(t, off)
		case 't':
			var items []any
			if items, _, err = d.popMark(); err == nil {
				err = d.push(Tuple(items), off)
			}
		case ']':
			err = d.push(&List{}, off)
		case 'l':
			var items []any
			if items, _, err = d.popMark(); err == nil {
				err = d.push(&List{Items: items}, off)
			}
		case '}':
			err = d.push(&Dict{}, off)
		case 'd':
			var items []any
			if items, _, err = d.popMark(); err == nil {
				dict := &Dict{}
				if err = setItems(dict, items); err == nil {
					err = d.push(dict, off)
				}
			}
		case 0x8f: // EMPTY_SET
			err = d.push(&List{}, off)
		case 0x90: // ADDITEMS
			var items []any
			if items, _, err = d.popMark(); err == nil {
				var t any
				if t, err = d.top(); err == nil {
					if l, ok := t.(*List); ok {
						l.Items = append(l.Items, items...)
					} else {
						err = corruptf("pickle ADDITEMS on %T", t)
					}
				}
			}
		case 0x91: // FROZENSET
			var items []any
			if items, _, err = d.popMark(); err == nil {
				err = d.push(&List{Items: items}, off)
			}
		case 'a': // APPEND
			var v, t any
			itemOff := 0
			if n := len(d.soff); n > 0 {
				itemOff = d.soff[n-1]
			}
			if v, err = d.pop(); err == nil {
				if t, err = d.top(); err == nil {
					if l, ok := t.(*List); ok {
						err = d.appendItems(l, []any{v}, itemOff, d.pos)
						numeric = isNumber(v)
					} else {
						err = corruptf("pickle APPEND on %T at byte %d", t, off)
					}
				}
			}
		case 'e': // APPENDS
			var items []any
			var m mark
			if items, m, err = d.popMark(); err == nil {
				var t any
				if t, err = d.top(); err == nil {
					if l, ok := t.(*List); ok {
						err = d.appendItems(l, items, m.off, d.pos)
						numeric = true
						for _, it := range items {
							if !isNumber(it) {
								numeric = false
								break
							}
						}
					} else {
						err = corruptf("pickle APPENDS on %T at byte %d", t, off)
					}
				}
			}
		case 's': // SETITEM
			var k, v, t any
			if v, err = d.pop(); err == nil {
				if k, err = d.pop(); err == nil {
					if t, err = d.top(); err == nil {
						err = setItems(t, []any{k, v})
					}
				}
			}
		case 'u': // SETITEMS
			var items []any
			if items, _, err = d.popMark(); err == nil {
				var t any
				if t, err = d.top(); err == nil {
					err = setItems(t, items)
				}
			}
		case 'p': // PUT (text)
			var s string
			if s, err = d.line(); err == nil {
				var n uint64
				if n, err = strconv.ParseUint(s, 10, 32); err != nil {
					err = corruptf("pickle: bad PUT at byte %d", off)
				} else {
					err = d.memoPut(uint32(n))
				}
			}
			numeric = true
		case 'q':
			var p []byte
			if p, err = d.need(1); err == nil {
				err = d.memoPut(uint32(p[0]))
			}
			numeric = true
		case 'r':
			var p []byte
			if p, err = d.need(4); err == nil {
				err = d.memoPut(binary.LittleEndian.Uint32(p))
			}
			numeric = true
		case 0x94: // MEMOIZE
			err = d.memoPut(uint32(len(d.memo)))
			numeric = true
		case 'g':
			var s string
			if s, err = d.line(); err == nil {
				var n uint64
				if n, err = strconv.ParseUint(s, 10, 32); err != nil {
					err = corruptf("pickle: bad GET at byte %d", off)
				} else {
					err = d.memoGet(uint32(n), off)
				}
			}
		case 'h':
			var p []byte
			if p, err = d.need(1); err == nil {
				err = d.memoGet(uint32(p[0]), off)
			}
		case 'j':
			var p []byte
			if p, err = d.need(4); err == nil {
				err = d.memoGet(binary.LittleEndian.Uint32(p), off)
			}
		case 'c': // GLOBAL module\nname\n
			var mod, name string
			if mod, err = d.line(); err == nil {
				if name, err = d.line(); err == nil {
					var g *global
					if g, err = lookupGlobal(mod, name); err == nil {
						err = d.push(g, off)
					}
				}
			}
		case 0x93: // STACK_GLOBAL
			var n, m any
			if n, err = d.pop(); err == nil {
				if m, err = d.pop(); err == nil {
					ms, ok1 := m.(string)
					ns, ok2 := n.(string)
					if !ok1 || !ok2 {
						err = corruptf("pickle STACK_GLOBAL with non-string operands")
					} else {
						var g *global
						if g, err = lookupGlobal(ms, ns); err == nil {
							err = d.push(g, off)
						}
					}
				}
			}
		case 'R': // REDUCE
			var args, fn any
			if args, err = d.pop(); err == nil {
				if fn, err = d.pop(); err == nil {
					var v any
					if v, err = reduce(fn, args); err == nil {
						err = d.push(v, off)
					}
				}
			}
		case 0x81: // NEWOBJ
			var args, cls any
			if args, err = d.pop(); err == nil {
				if cls, err = d.pop(); err == nil {
					var v any
					if v, err = newObj(cls, args); err == nil {
						err = d.push(v, off)
					}
				}
			}
		case 0x92: // NEWOBJ_EX
			var kw, args, cls any
			if kw, err = d.pop(); err == nil {
				if args, err = d.pop(); err == nil {
					if cls, err = d.pop(); err == nil {
						if kd, ok := kw.(*Dict); ok && len(kd.Keys) > 0 {
							err = corruptf("pickle NEWOBJ_EX with keyword arguments is not supported")
						} else {
							var v any
							if v, err = newObj(cls, args); err == nil {
								err = d.push(v, off)
							}
						}
					}
				}
			}
		case 'b': // BUILD
			var state, obj any
			if state, err = d.pop(); err == nil {
				if obj, err = d.top(); err == nil {
					var nv any
					if nv, err = build(obj, state); err == nil && nv != nil {
						d.stack[len(d.stack)-1] = nv
					}
				}
			}
		case 'i': // INST module\nname\n (class instantiation, protocol 0)
			var mod, name string
			if mod, err = d.line(); err == nil {
				if name, err = d.line(); err == nil {
					var g *global
					if g, err = lookupGlobal(mod, name); err == nil {
						var items []any
						if items, _, err = d.popMark(); err == nil {
							var v any
							if v, err = newObj(g, Tuple(items)); err == nil {
								err = d.push(v, off)
							}
						}
					}
				}
			}
		case 'o': // OBJ
			var items []any
			if items, _, err = d.popMark(); err == nil {
				if len(items) == 0 {
					err = corruptf("pickle OBJ without a class")
				} else {
					var v any
					if v, err = newObj(items[0], Tuple(items[1:])); err == nil {
						err = d.push(v, off)
					}
				}
			}
		case 'Q': // BINPERSID
			var pid any
			if pid, err = d.pop(); err == nil {
				if d.pload == nil {
					err = corruptf("pickle has a persistent id outside a torch archive")
				} else {
					var v any
					if v, err = d.pload(pid); err == nil {
						err = d.push(v, off)
					}
				}
			}
		case 'P': // PERSID (text)
			err = corruptf("pickle text persistent ids are not supported")
		case 0x82, 0x83, 0x84: // EXT1, EXT2, EXT4: the copyreg extension registry
			err = &ForbiddenError{"copyreg", "extension registry code"}
		case 0x97, 0x98: // NEXT_BUFFER, READONLY_BUFFER
			err = corruptf("pickle out-of-band buffers are not supported")
		default:
			err = corruptf("pickle: unknown opcode 0x%02x at byte %d", op, off)
		}
		if err != nil {
			return nil, err
		}
		if !numeric {
			d.pure = off
		}
	}
}

// fastAppends handles the common `MARK number… APPENDS` batch of a numeric list without pushing the numbers:
// when the list below the mark can stay lazy and the batch holds only number opcodes, the span is extended and
// the decoder jumps past APPENDS. off is the MARK's offset; d.pos is just after it.
func (d *decoder) fastAppends(off int) bool {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1].stack == n) {
		return false
	}
	l, ok := d.stack[n-1].(*List)
	if !ok || len(l.Items) != 0 || d.pure >= off || (l.Span.N > 0 && l.Span.End != off) {
		return false
	}
	b := d.b
	p := d.pos
	count, floats := 0, false
	for p < len(b) {
		switch b[p] {
		case 'K':
			p += 2
		case 'M':
			p += 3
		case 'J':
			p += 5
		case 'G':
			p += 9
			floats = true
		case 0x88, 0x89:
			p++
		case 0x8a:
			if p+1 >= len(b) || b[p+1] > 8 {
				return false
			}
			p += 2 + int(b[p+1])
		case 'e':
			if count == 0 || p >= len(b) {
				return false
			}
			if l.Span.N == 0 {
				l.Span.Start = off
			}
			l.Span.End = p + 1
			l.Span.N += count
			l.Span.Floats = l.Span.Floats || floats
			d.pos = p + 1
			return true
		default:
			return false
		}
		count++
	}
	return false
}

func (d *decoder) length(op byte) (int, error) {
	var n uint64
	switch op {
	case 0x8c, 'C', 'U':
		p, err := d.need(1)
		if err != nil {
			return 0, err
		}
		n = uint64(p[0])
	case 'X', 'B', 'T':
		p, err := d.need(4)
		if err != nil {
			return 0, err
		}
		if op == 'T' && int32(binary.LittleEndian.Uint32(p)) < 0 {
			return 0, corruptf("pickle: negative BINSTRING length")
		}
		n = uint64(binary.LittleEndian.Uint32(p))
	default:
		p, err := d.need(8)
		if err != nil {
			return 0, err
		}
		n = binary.LittleEndian.Uint64(p)
	}
	if n > uint64(len(d.b)-d.pos) {
		return 0, corruptf("pickle truncated at byte %d: a %d-byte string does not fit", d.pos, n)
	}
	return int(n), nil
}

func (d *decoder) pushText(op byte, s string, off int) error {
	switch op {
	case 'I':
		switch s {
		case "00":
			return d.push(false, off)
		case "01":
			return d.push(true, off)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return corruptf("pickle: bad INT %q", s)
		}
		return d.push(n, off)
	case 'L':
		s = strings.TrimSuffix(s, "L")
		x, ok := new(big.Int).SetString(s, 10)
		if !ok || len(s) > 1<<12 {
			return corruptf("pickle: bad LONG")
		}
		if x.IsInt64() {
			return d.push(x.Int64(), off)
		}
		return d.push(x, off)
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return corruptf("pickle: bad FLOAT %q", s)
		}
		return d.push(f, off)
	}
}

// pyString decodes Python's "surrogatepass" UTF-8 leniently: invalid bytes become U+FFFD.
func pyString(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return strings.ToValidUTF8(string(p), "\uFFFD")
}

func rawUnicodeEscape(s string) string {
	if !strings.Contains(s, `\u`) && !strings.Contains(s, `\U`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+5 < len(s)+0 && (s[i+1] == 'u' || s[i+1] == 'U') {
			w := 4
			if s[i+1] == 'U' {
				w = 8
			}
			if i+2+w <= len(s) {
				if r, err := strconv.ParseUint(s[i+2:i+2+w], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 1 + w
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func setItems(t any, items []any) error {
	if len(items)%2 != 0 {
		return corruptf("pickle SETITEMS with an odd number of items")
	}
	switch x := t.(type) {
	case *Dict:
		for i := 0; i < len(items); i += 2 {
			x.set(items[i], items[i+1])
		}
		return nil
	case *Object:
		for i := 0; i < len(items); i += 2 {
			x.State.set(items[i], items[i+1])
		}
		return nil
	}
	return corruptf("pickle SETITEM on %T", t)
}
