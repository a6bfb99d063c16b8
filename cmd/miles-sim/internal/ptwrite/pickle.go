// Package ptwrite writes torch.save-compatible .pt files from Go: a zip archive holding a protocol-2 pickle
// (<name>/data.pkl), one stored record per tensor storage (<name>/data/<key>), <name>/byteorder and
// <name>/version, laid out the way torch's PyTorchStreamWriter does (records aligned to 64 bytes, data
// descriptors, no compression). The pickle references only what the dashboard's dump reader allows
// (dashboard/dumps/allowlist.go) and torch.load(weights_only=True) accepts: torch._utils._rebuild_tensor_v2,
// torch.<Type>Storage and collections.OrderedDict.
//
// Values: nil (None), bool, int, int64, float64, string, []any (list), []int64, []int32, []float64, []string
// (lists of numbers or strings), Tuple, *Dict (insertion ordered, string keys) and *Tensor.
package ptwrite

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Tuple is a Python tuple.
type Tuple []any

// Dict is a Python dict with string keys, in insertion order.
type Dict struct {
	keys []string
	vals []any
	idx  map[string]int
}

// NewDict makes a dict from alternating keys and values.
func NewDict(kv ...any) *Dict {
	d := &Dict{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Set(kv[i].(string), kv[i+1])
	}
	return d
}

// Set adds or replaces a key.
func (d *Dict) Set(k string, v any) *Dict {
	if d.idx == nil {
		d.idx = map[string]int{}
	}
	if i, ok := d.idx[k]; ok {
		d.vals[i] = v
		return d
	}
	d.idx[k] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return d
}

// Get returns a key's value.
func (d *Dict) Get(k string) (any, bool) {
	i, ok := d.idx[k]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// DType is a tensor element type.
type DType uint8

// Element types (the storage class torch pickles for each).
const (
	Float32 DType = iota + 1 // torch.FloatStorage
	Int32                    // torch.IntStorage
	Int64                    // torch.LongStorage
)

func (t DType) storage() string {
	switch t {
	case Float32:
		return "FloatStorage"
	case Int32:
		return "IntStorage"
	case Int64:
		return "LongStorage"
	}
	panic("ptwrite: unknown dtype")
}

func (t DType) size() int {
	if t == Int64 {
		return 8
	}
	return 4
}

// Tensor is a contiguous CPU tensor with its own storage: raw little-endian elements and a shape.
type Tensor struct {
	DType DType
	Shape []int64
	Data  []byte
}

// Numel is the number of elements.
func (t *Tensor) Numel() int64 { return int64(len(t.Data) / t.DType.size()) }

// FloatTensor is a 1-D float32 tensor.
func FloatTensor(v []float32) *Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &Tensor{DType: Float32, Shape: []int64{int64(len(v))}, Data: b}
}

// IntTensor is a 1-D int32 tensor.
func IntTensor(v []int32) *Tensor {
	return &Tensor{DType: Int32, Shape: []int64{int64(len(v))}, Data: appendLE(make([]byte, 0, 4*len(v)), v)}
}

// LongTensor is a 1-D int64 tensor.
func LongTensor(v []int64) *Tensor {
	return &Tensor{DType: Int64, Shape: []int64{int64(len(v))}, Data: appendLE(make([]byte, 0, 8*len(v)), v)}
}

// appendLE appends the little-endian encoding of x, a fixed-size number or slice of them, to b. encoding/binary
// writes a signed value as its two's complement, the bytes pickle and torch storages hold, with no integer
// conversion here to get wrong; it fails only for a type that is not fixed-size, which is a bug in this package.
func appendLE(b []byte, x any) []byte {
	b, err := binary.Append(b, binary.LittleEndian, x)
	if err != nil {
		panic("ptwrite: " + err.Error())
	}
	return b
}

// Pickle opcodes (protocol 2) used by the writer.
const (
	opProto      = 0x80
	opStop       = '.'
	opMark       = '('
	opNone       = 'N'
	opTrue       = 0x88
	opFalse      = 0x89
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opBinUnicode = 'X'
	opEmptyList  = ']'
	opAppend     = 'a'
	opAppends    = 'e'
	opEmptyDict  = '}'
	opSetItem    = 's'
	opSetItems   = 'u'
	opEmptyTuple = ')'
	opTuple      = 't'
	opTuple1     = 0x85
	opTuple2     = 0x86
	opTuple3     = 0x87
	opGlobal     = 'c'
	opReduce     = 'R'
	opBinPersID  = 'Q'
	opBinPut     = 'q'
	opLongBinPut = 'r'
	opBinGet     = 'h'
	opLongBinGet = 'j'
)

// batchSize is how many items Python's pickler puts between one MARK and its APPENDS/SETITEMS.
const batchSize = 1000

// pickler encodes values like CPython's protocol-2 Pickler: containers and strings are memoized (strings by
// value, which CPython does for identical objects), numbers are not, and lists and dicts are filled in batches
// of 1000 items.
type pickler struct {
	b        []byte
	err      error             // set by str for a string too long for BINUNICODE, returned by Pickle
	memo     map[string]uint32 // "s:<string>" or "g:<module.name>"
	next     uint32
	storages []*Tensor // in key order ("0", "1", …)
}

func (p *pickler) put() {
	if p.next < 256 {
		p.b = append(p.b, opBinPut, byte(p.next))
	} else {
		p.b = append(p.b, opLongBinPut)
		p.b = binary.LittleEndian.AppendUint32(p.b, p.next)
	}
	p.next++
}

func (p *pickler) get(i uint32) {
	if i < 256 {
		p.b = append(p.b, opBinGet, byte(i))
	} else {
		p.b = append(p.b, opLongBinGet)
		p.b = binary.LittleEndian.AppendUint32(p.b, i)
	}
}

func (p *pickler) memoized(key string) bool {
	if i, ok := p.memo[key]; ok {
		p.get(i)
		return true
	}
	p.memo[key] = p.next
	return false
}

func (p *pickler) int(x int64) {
	switch {
	case x >= 0 && x <= math.MaxUint8:
		p.b = appendLE(append(p.b, opBinInt1), uint8(x))
	case x >= 0 && x <= math.MaxUint16:
		p.b = appendLE(append(p.b, opBinInt2), uint16(x))
	case x >= math.MinInt32 && x <= math.MaxInt32:
		p.b = appendLE(append(p.b, opBinInt), int32(x))
	default: // LONG1: minimal little-endian two's complement
		le := [8]byte(appendLE(make([]byte, 0, 8), x))
		n := uint8(len(le))
		for n > 1 {
			last, prev := le[n-1], le[n-2]
			if (last == 0 && prev&0x80 == 0) || (last == 0xff && prev&0x80 != 0) {
				n--
				continue
			}
			break
		}
		p.b = append(p.b, opLong1, n)
		p.b = append(p.b, le[:n]...)
	}
}

func (p *pickler) float(f float64) {
	p.b = append(p.b, opBinFloat)
	p.b = binary.BigEndian.AppendUint64(p.b, math.Float64bits(f))
}

func (p *pickler) str(s string) {
	if p.memoized("s:" + s) {
		return
	}
	n := int64(len(s))
	if n > math.MaxUint32 { // BINUNICODE8 (protocol 4) would be needed
		if p.err == nil {
			p.err = fmt.Errorf("ptwrite: string of %d bytes is too long for a protocol-2 pickle", n)
		}
		return
	}
	p.b = append(p.b, opBinUnicode)
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(n))
	p.b = append(p.b, s...)
	p.put()
}

func (p *pickler) global(module, name string) {
	if p.memoized("g:" + module + "." + name) {
		return
	}
	p.b = append(p.b, opGlobal)
	p.b = append(p.b, module+"\n"+name+"\n"...)
	p.put()
}

// list writes a list of n items, item(i) encoding the i-th.
func (p *pickler) list(n int, item func(i int) error) error {
	p.b = append(p.b, opEmptyList)
	p.put()
	for lo := 0; lo < n; lo += batchSize {
		hi := min(lo+batchSize, n)
		if hi-lo > 1 {
			p.b = append(p.b, opMark)
		}
		for i := lo; i < hi; i++ {
			if err := item(i); err != nil {
				return err
			}
		}
		if hi-lo > 1 {
			p.b = append(p.b, opAppends)
		} else {
			p.b = append(p.b, opAppend)
		}
	}
	return nil
}

func (p *pickler) tuple(t Tuple) error {
	if len(t) == 0 {
		p.b = append(p.b, opEmptyTuple)
		return nil
	}
	if len(t) > 3 {
		p.b = append(p.b, opMark)
	}
	for _, v := range t {
		if err := p.value(v); err != nil {
			return err
		}
	}
	switch len(t) {
	case 1:
		p.b = append(p.b, opTuple1)
	case 2:
		p.b = append(p.b, opTuple2)
	case 3:
		p.b = append(p.b, opTuple3)
	default:
		p.b = append(p.b, opTuple)
	}
	p.put()
	return nil
}

func (p *pickler) dict(d *Dict) error {
	p.b = append(p.b, opEmptyDict)
	p.put()
	n := len(d.keys)
	for lo := 0; lo < n; lo += batchSize {
		hi := min(lo+batchSize, n)
		if hi-lo > 1 {
			p.b = append(p.b, opMark)
		}
		for i := lo; i < hi; i++ {
			p.str(d.keys[i])
			if err := p.value(d.vals[i]); err != nil {
				return fmt.Errorf("%s: %w", d.keys[i], err)
			}
		}
		if hi-lo > 1 {
			p.b = append(p.b, opSetItems)
		} else {
			p.b = append(p.b, opSetItem)
		}
	}
	return nil
}

// tensor writes torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict()),
// the storage as the persistent id ('storage', torch.<Type>Storage, key, 'cpu', numel) torch.save records.
func (p *pickler) tensor(t *Tensor) error {
	if len(t.Data)%t.DType.size() != 0 {
		return fmt.Errorf("tensor data of %d bytes is not a whole number of %d-byte elements", len(t.Data), t.DType.size())
	}
	n := int64(1)
	for _, s := range t.Shape {
		n *= s
	}
	if n != t.Numel() {
		return fmt.Errorf("tensor shape %v does not hold %d elements", t.Shape, t.Numel())
	}
	key := strconv.Itoa(len(p.storages))
	p.storages = append(p.storages, t)
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.b = append(p.b, opMark, opMark)
	p.str("storage")
	p.global("torch", t.DType.storage())
	p.str(key)
	p.str("cpu")
	p.int(t.Numel())
	p.b = append(p.b, opTuple)
	p.put()
	p.b = append(p.b, opBinPersID)
	p.int(0)
	size, stride := make(Tuple, len(t.Shape)), make(Tuple, len(t.Shape))
	st := int64(1)
	for i := len(t.Shape) - 1; i >= 0; i-- {
		size[i], stride[i] = t.Shape[i], st
		st *= max(t.Shape[i], 1)
	}
	if err := p.tuple(size); err != nil {
		return err
	}
	if err := p.tuple(stride); err != nil {
		return err
	}
	p.b = append(p.b, opFalse)
	p.global("collections", "OrderedDict")
	p.b = append(p.b, opEmptyTuple, opReduce)
	p.put()
	p.b = append(p.b, opTuple)
	p.put()
	p.b = append(p.b, opReduce)
	p.put()
	return nil
}

func (p *pickler) value(v any) error {
	switch x := v.(type) {
	case nil:
		p.b = append(p.b, opNone)
	case bool:
		if x {
			p.b = append(p.b, opTrue)
		} else {
			p.b = append(p.b, opFalse)
		}
	case int:
		p.int(int64(x))
	case int64:
		p.int(x)
	case int32:
		p.int(int64(x))
	case float64:
		p.float(x)
	case float32:
		p.float(float64(x))
	case string:
		p.str(x)
	case []any:
		return p.list(len(x), func(i int) error { return p.value(x[i]) })
	case []int64:
		return p.list(len(x), func(i int) error { p.int(x[i]); return nil })
	case []int32:
		return p.list(len(x), func(i int) error { p.int(int64(x[i])); return nil })
	case []int:
		return p.list(len(x), func(i int) error { p.int(int64(x[i])); return nil })
	case []float64:
		return p.list(len(x), func(i int) error { p.float(x[i]); return nil })
	case []string:
		return p.list(len(x), func(i int) error { p.str(x[i]); return nil })
	case Tuple:
		return p.tuple(x)
	case *Dict:
		return p.dict(x)
	case *Tensor:
		return p.tensor(x)
	default:
		return fmt.Errorf("ptwrite: cannot pickle %T", v)
	}
	return nil
}

// Pickle encodes v as a protocol-2 pickle and returns it with the tensors whose storages it references, in
// storage-key order.
func Pickle(v any) ([]byte, []*Tensor, error) {
	p := &pickler{memo: map[string]uint32{}}
	p.b = append(p.b, opProto, 2)
	if err := p.value(v); err != nil {
		return nil, nil, err
	}
	if p.err != nil {
		return nil, nil, p.err
	}
	p.b = append(p.b, opStop)
	return p.b, p.storages, nil
}
