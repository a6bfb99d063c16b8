package dumps

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is an element type of a tensor, storage or numpy array.
type DType uint8

// Element types.
const (
	DTUnknown DType = iota
	F32
	F64
	F16
	BF16
	I64
	I32
	I16
	I8
	U8
	Bool
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	{"unknown", 1},
	{"float32", 4},
	{"float64", 8},
	{"float16", 2},
	{"bfloat16", 2},
	{"int64", 8},
	{"int32", 4},
	{"int16", 2},
	{"int8", 1},
	{"uint8", 1},
	{"bool", 1},
}

// Size is the element size in bytes.
func (t DType) Size() int { return dtypeInfo[t].size }

func (t DType) String() string { return dtypeInfo[t].name }

// IsFloat tells floating types.
func (t DType) IsFloat() bool { return t == F32 || t == F64 || t == F16 || t == BF16 }

// Storage is a torch storage record of the archive (data/<Key>).
type Storage struct {
	Key   string
	DType DType
	Numel int64
}

// Tensor describes a tensor: a strided view of a storage. No data is read until asked (see Archive).
type Tensor struct {
	Storage *Storage
	DType   DType
	Offset  int64 // in elements
	Shape   []int64
	Stride  []int64
}

// Numel is the number of elements.
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// NDArray is a numpy array (data kept raw, little endian), or an object array (Objects).
type NDArray struct {
	DType   DType
	Shape   []int64
	Data    []byte
	Objects []any
}

type npDType struct {
	dt    DType
	code  string
	order byte
}

type allowKind uint8

const (
	kRebuildV2 allowKind = iota + 1
	kRebuildV3
	kRebuildV1
	kRebuildParam
	kRebuildFromType
	kTensorClass
	kStorageType
	kTorchDType
	kDevice
	kSize
	kOrderedDict
	kSet
	kByteArray
	kCodecsEncode
	kNpReconstruct
	kNpNDArray
	kNpDType
	kNpScalar
	kRecord
	kReconstructor
	kObjectBase
)

type allowed struct {
	kind  allowKind
	dtype DType
}

// allowList is every callable or class a dump may reference. Nothing here runs code: each kind maps to a Go
// constructor in reduce/newObj/build that checks its arguments and returns plain data.
var allowList = func() map[string]*allowed {
	m := map[string]*allowed{
		"torch._utils._rebuild_tensor_v2":                {kind: kRebuildV2},
		"torch._utils._rebuild_tensor_v3":                {kind: kRebuildV3},
		"torch._utils._rebuild_tensor":                   {kind: kRebuildV1},
		"torch._utils._rebuild_parameter":                {kind: kRebuildParam},
		"torch._tensor._rebuild_from_type_v2":            {kind: kRebuildFromType},
		"torch.Tensor":                                   {kind: kTensorClass},
		"torch._tensor.Tensor":                           {kind: kTensorClass},
		"torch.nn.parameter.Parameter":                   {kind: kTensorClass},
		"torch.device":                                   {kind: kDevice},
		"torch.Size":                                     {kind: kSize},
		"collections.OrderedDict":                        {kind: kOrderedDict},
		"builtins.set":                                   {kind: kSet},
		"builtins.frozenset":                             {kind: kSet},
		"__builtin__.set":                                {kind: kSet},
		"builtins.bytearray":                             {kind: kByteArray},
		"_codecs.encode":                                 {kind: kCodecsEncode},
		"numpy.core.multiarray._reconstruct":             {kind: kNpReconstruct},
		"numpy._core.multiarray._reconstruct":            {kind: kNpReconstruct},
		"numpy.ndarray":                                  {kind: kNpNDArray},
		"numpy.dtype":                                    {kind: kNpDType},
		"numpy.core.multiarray.scalar":                   {kind: kNpScalar},
		"numpy._core.multiarray.scalar":                  {kind: kNpScalar},
		"miles.utils.types.Sample":                       {kind: kRecord},
		"copyreg._reconstructor":                         {kind: kReconstructor},
		"copy_reg._reconstructor":                        {kind: kReconstructor},
		"builtins.object":                                {kind: kObjectBase},
		"__builtin__.object":                             {kind: kObjectBase},
		"torch.serialization._get_layout":                nil, // explicitly not allowed (sparse layouts)
		"torch._utils._rebuild_sparse_tensor":            nil,
		"torch._utils._rebuild_qtensor":                  nil,
		"torch._utils._rebuild_device_tensor_from_numpy": nil,
	}
	for name, dt := range map[string]DType{
		"FloatStorage": F32, "DoubleStorage": F64, "HalfStorage": F16, "BFloat16Storage": BF16,
		"LongStorage": I64, "IntStorage": I32, "ShortStorage": I16, "CharStorage": I8, "ByteStorage": U8,
		"BoolStorage": Bool, "UntypedStorage": DTUnknown,
	} {
		m["torch."+name] = &allowed{kind: kStorageType, dtype: dt}
		m["torch.storage."+name] = &allowed{kind: kStorageType, dtype: dt}
	}
	for name, dt := range map[string]DType{
		"float32": F32, "float": F32, "float64": F64, "double": F64, "float16": F16, "half": F16,
		"bfloat16": BF16, "int64": I64, "long": I64, "int32": I32, "int": I32, "int16": I16, "short": I16,
		"int8": I8, "uint8": U8, "bool": Bool,
	} {
		m["torch."+name] = &allowed{kind: kTorchDType, dtype: dt}
	}
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	return m
}()

func lookupGlobal(module, name string) (*global, error) {
	spec, ok := allowList[module+"."+name]
	if !ok {
		return nil, &ForbiddenError{module, name}
	}
	return &global{module: module, name: name, spec: spec}, nil
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func intTuple(v any) ([]int64, bool) {
	t, ok := v.(Tuple)
	if !ok {
		l, ok2 := v.(*List)
		if !ok2 || l.Span.N != 0 {
			return nil, false
		}
		t = Tuple(l.Items)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := asInt(x)
		if !ok || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

func argTuple(args any, minLen, maxLen int, what string) (Tuple, error) {
	t, ok := args.(Tuple)
	if !ok || len(t) < minLen || len(t) > maxLen {
		return nil, corruptf("%s: unexpected arguments %s", what, describe(args))
	}
	return t, nil
}

// describe names a value's type for error messages without printing its contents.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case Tuple:
		return fmt.Sprintf("tuple of %d", len(x))
	case *List:
		return fmt.Sprintf("list of %d", x.Len())
	case *Dict:
		return fmt.Sprintf("dict of %d", len(x.Keys))
	case *global:
		return x.String()
	}
	return fmt.Sprintf("%T", v)
}

func rebuildTensor(t Tuple, what string, dt DType) (*Tensor, error) {
	st, ok := t[0].(*Storage)
	if !ok {
		return nil, corruptf("%s: first argument is %s, not a storage", what, describe(t[0]))
	}
	off, ok1 := asInt(t[1])
	shape, ok2 := intTuple(t[2])
	stride, ok3 := intTuple(t[3])
	if !ok1 || !ok2 || !ok3 || off < 0 || len(shape) != len(stride) || len(shape) > 8 {
		return nil, corruptf("%s: bad offset/size/stride", what)
	}
	if dt == DTUnknown {
		dt = st.DType
	}
	ten := &Tensor{Storage: st, DType: dt, Offset: off, Shape: shape, Stride: stride}
	// every addressed element must lie inside the storage
	last := off
	for i, s := range shape {
		if s == 0 {
			return ten, nil
		}
		if s > math.MaxInt32 || stride[i] > math.MaxInt32 {
			return nil, corruptf("%s: size out of range", what)
		}
		last += (s - 1) * stride[i]
	}
	limit := st.Numel
	if st.DType == DTUnknown && dt.Size() > 0 { // untyped storages count bytes
		limit = st.Numel / int64(dt.Size())
	}
	if last >= limit {
		return nil, corruptf("%s: view reaches element %d of a %d-element storage", what, last, limit)
	}
	return ten, nil
}

func reduce(fn, args any) (any, error) {
	g, ok := fn.(*global)
	if !ok {
		return nil, corruptf("pickle REDUCE on %s, which is not an allow-listed callable", describe(fn))
	}
	name := g.String()
	switch g.spec.kind {
	case kRebuildV2:
		t, err := argTuple(args, 6, 7, name)
		if err != nil {
			return nil, err
		}
		return rebuildTensor(t, name, DTUnknown)
	case kRebuildV3:
		t, err := argTuple(args, 7, 8, name)
		if err != nil {
			return nil, err
		}
		dg, ok := t[6].(*global)
		if !ok || dg.spec.kind != kTorchDType {
			return nil, corruptf("%s: dtype argument is %s", name, describe(t[6]))
		}
		return rebuildTensor(t, name, dg.spec.dtype)
	case kRebuildV1:
		t, err := argTuple(args, 4, 4, name)
		if err != nil {
			return nil, err
		}
		return rebuildTensor(t, name, DTUnknown)
	case kRebuildParam:
		t, err := argTuple(args, 3, 3, name)
		if err != nil {
			return nil, err
		}
		if _, ok := t[0].(*Tensor); !ok {
			return nil, corruptf("%s: data is %s", name, describe(t[0]))
		}
		return t[0], nil
	case kRebuildFromType:
		t, err := argTuple(args, 4, 4, name)
		if err != nil {
			return nil, err
		}
		f, ok := t[0].(*global)
		cls, ok2 := t[1].(*global)
		if !ok || !ok2 || cls.spec.kind != kTensorClass {
			return nil, corruptf("%s: unexpected function or type", name)
		}
		if st, ok := t[3].(*Dict); t[3] != nil && (!ok || len(st.Keys) > 0) {
			return nil, corruptf("%s: tensors with Python state are not supported", name)
		}
		return reduce(f, t[2])
	case kDevice:
		t, err := argTuple(args, 1, 2, name)
		if err != nil {
			return nil, err
		}
		return fmt.Sprint(t[0]), nil
	case kSize:
		t, err := argTuple(args, 1, 1, name)
		if err != nil {
			return nil, err
		}
		if sz, ok := intTuple(t[0]); ok {
			out := make(Tuple, len(sz))
			for i, s := range sz {
				out[i] = s
			}
			return out, nil
		}
		return nil, corruptf("%s: bad size", name)
	case kOrderedDict:
		t, err := argTuple(args, 0, 1, name)
		if err != nil {
			return nil, err
		}
		d := &Dict{}
		if len(t) == 1 {
			var pairs []any
			switch x := t[0].(type) {
			case *List:
				pairs = x.Items
			case Tuple:
				pairs = x
			default:
				return nil, corruptf("%s: bad items", name)
			}
			for _, p := range pairs {
				kv, ok := p.(Tuple)
				if !ok || len(kv) != 2 {
					return nil, corruptf("%s: bad item", name)
				}
				d.set(kv[0], kv[1])
			}
		}
		return d, nil
	case kSet:
		t, err := argTuple(args, 0, 1, name)
		if err != nil {
			return nil, err
		}
		if len(t) == 0 {
			return &List{}, nil
		}
		if l, ok := t[0].(*List); ok {
			return l, nil
		}
		if tt, ok := t[0].(Tuple); ok {
			return &List{Items: tt}, nil
		}
		return nil, corruptf("%s: bad items", name)
	case kByteArray:
		t, err := argTuple(args, 0, 2, name)
		if err != nil {
			return nil, err
		}
		if len(t) == 0 {
			return []byte{}, nil
		}
		switch x := t[0].(type) {
		case []byte:
			return x, nil
		case string:
			return latin1(x)
		}
		return nil, corruptf("%s: bad argument", name)
	case kCodecsEncode:
		t, err := argTuple(args, 2, 2, name)
		if err != nil {
			return nil, err
		}
		s, ok := t[0].(string)
		enc, ok2 := t[1].(string)
		if !ok || !ok2 || (enc != "latin1" && enc != "latin-1") {
			return nil, corruptf("%s: only (str, 'latin1') is supported", name)
		}
		return latin1(s)
	case kNpReconstruct:
		t, err := argTuple(args, 3, 3, name)
		if err != nil {
			return nil, err
		}
		if c, ok := t[0].(*global); !ok || c.spec.kind != kNpNDArray {
			return nil, corruptf("%s: only numpy.ndarray is supported", name)
		}
		return &NDArray{}, nil
	case kNpDType:
		t, err := argTuple(args, 1, 3, name)
		if err != nil {
			return nil, err
		}
		code, ok := t[0].(string)
		if !ok {
			return nil, corruptf("%s: bad dtype", name)
		}
		return &npDType{dt: npCode(code), code: code, order: '<'}, nil
	case kNpScalar:
		t, err := argTuple(args, 1, 2, name)
		if err != nil {
			return nil, err
		}
		dt, ok := t[0].(*npDType)
		if !ok || len(t) != 2 {
			return nil, corruptf("%s: bad arguments", name)
		}
		raw, ok := t[1].([]byte)
		if !ok {
			return nil, corruptf("%s: bad data", name)
		}
		if dt.order == '>' {
			return nil, corruptf("%s: big-endian data is not supported", name)
		}
		if dt.dt == DTUnknown || len(raw) != dt.dt.Size() {
			return nil, corruptf("%s: unsupported dtype %q", name, dt.code)
		}
		return scalarAt(raw, dt.dt, 0), nil
	case kRecord:
		t, err := argTuple(args, 0, 0, name)
		if err != nil {
			return nil, err
		}
		_ = t
		return &Object{Class: name, State: &Dict{}}, nil
	case kReconstructor:
		t, err := argTuple(args, 3, 3, name)
		if err != nil {
			return nil, err
		}
		cls, ok := t[0].(*global)
		base, ok2 := t[1].(*global)
		if !ok || !ok2 || cls.spec.kind != kRecord || base.spec.kind != kObjectBase || t[2] != nil {
			return nil, corruptf("%s: only plain records are supported", name)
		}
		return &Object{Class: cls.String(), State: &Dict{}}, nil
	}
	return nil, corruptf("pickle REDUCE on %s, which is a class or value, not a constructor", name)
}

func newObj(cls, args any) (any, error) {
	g, ok := cls.(*global)
	if !ok {
		return nil, corruptf("pickle NEWOBJ on %s", describe(cls))
	}
	switch g.spec.kind {
	case kRecord:
		return &Object{Class: g.String(), State: &Dict{}}, nil
	case kOrderedDict:
		return &Dict{}, nil
	case kSet:
		return reduce(g, args)
	}
	return nil, corruptf("pickle NEWOBJ on %s is not supported", g.String())
}

func build(obj, state any) error {
	switch x := obj.(type) {
	case *Object:
		switch s := state.(type) {
		case *Dict:
			for i := range s.Keys {
				x.State.set(s.Keys[i], s.Vals[i])
			}
			return nil
		case Tuple:
			for _, part := range s {
				if d, ok := part.(*Dict); ok {
					for i := range d.Keys {
						x.State.set(d.Keys[i], d.Vals[i])
					}
				} else if part != nil {
					return corruptf("pickle BUILD of %s with %s", x.Class, describe(part))
				}
			}
			return nil
		}
		return corruptf("pickle BUILD of %s with %s", x.Class, describe(state))
	case *Dict:
		if s, ok := state.(*Dict); ok {
			for i := range s.Keys {
				x.set(s.Keys[i], s.Vals[i])
			}
			return nil
		}
		if state == nil {
			return nil
		}
	case *npDType:
		// (version, byteorder, subarray, names, fields, elsize, alignment, flags)
		if t, ok := state.(Tuple); ok && len(t) >= 2 {
			if o, ok := t[1].(string); ok && len(o) == 1 {
				x.order = o[0]
			}
			if len(t) >= 4 && (t[2] != nil || t[3] != nil) {
				x.dt = DTUnknown // structured or sub-array dtypes are not read
				x.code = "structured"
			}
			return nil
		}
	case *NDArray:
		t, ok := state.(Tuple)
		if !ok || len(t) != 5 {
			return corruptf("numpy array state is %s", describe(state))
		}
		shape, ok1 := intTuple(t[1])
		dt, ok2 := t[2].(*npDType)
		if !ok1 || !ok2 || len(shape) > 8 {
			return corruptf("numpy array state: bad shape or dtype")
		}
		n := int64(1)
		for _, s := range shape {
			if s > 0 && n > math.MaxInt32/s {
				return corruptf("numpy array state: shape too large")
			}
			n *= s
		}
		x.Shape = shape
		x.DType = dt.dt
		switch raw := t[4].(type) {
		case []byte:
			if dt.order == '>' && dt.dt.Size() > 1 {
				return corruptf("numpy array: big-endian data is not supported")
			}
			if dt.dt == DTUnknown {
				return corruptf("numpy array: unsupported dtype %q", dt.code)
			}
			if int64(len(raw)) != n*int64(dt.dt.Size()) {
				return corruptf("numpy array: %d data bytes for %d elements of %s", len(raw), n, dt.dt)
			}
			if f, _ := asInt(t[3]); f == 1 && len(shape) > 1 {
				return corruptf("numpy array: Fortran order is not supported")
			}
			x.Data = raw
		case *List:
			if int64(raw.Len()) != n {
				return corruptf("numpy object array: %d items for %d elements", raw.Len(), n)
			}
			x.Objects = raw.Items
			if raw.Span.N > 0 {
				return corruptf("numpy object array of numbers is not supported")
			}
		default:
			return corruptf("numpy array data is %s", describe(t[4]))
		}
		return nil
	}
	return corruptf("pickle BUILD on %s is not supported", describe(obj))
}

func latin1(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || r > 255 {
			return nil, corruptf("latin1 bytes out of range")
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func npCode(code string) DType {
	c := code
	if c != "" && (c[0] == '<' || c[0] == '>' || c[0] == '=' || c[0] == '|') {
		c = c[1:]
	}
	switch c {
	case "f4", "float32":
		return F32
	case "f8", "float64":
		return F64
	case "f2", "float16":
		return F16
	case "i8", "int64":
		return I64
	case "i4", "int32":
		return I32
	case "i2", "int16":
		return I16
	case "i1", "int8":
		return I8
	case "u1", "uint8":
		return U8
	case "b1", "bool", "?":
		return Bool
	}
	return DTUnknown
}

// scalarAt decodes element i of little-endian raw data.
func scalarAt(raw []byte, dt DType, i int) any {
	switch dt {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	case F16:
		return float64(halfToFloat(binary.LittleEndian.Uint16(raw[2*i:])))
	case BF16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16))
	case I64:
		return signed(binary.LittleEndian.Uint64(raw[8*i:]), 64)
	case I32:
		return signed(uint64(binary.LittleEndian.Uint32(raw[4*i:])), 32)
	case I16:
		return signed(uint64(binary.LittleEndian.Uint16(raw[2*i:])), 16)
	case I8:
		return signed(uint64(raw[i]), 8)
	case U8:
		return int64(raw[i])
	case Bool:
		return raw[i] != 0
	}
	return nil
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch exp {
	case 0: // zero or subnormal: frac · 2^-24
		v := float32(frac) / (1 << 24)
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
