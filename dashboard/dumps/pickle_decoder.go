package dumps

import (
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits bound what a pickle may make the decoder hold.
const (
	maxStack = 1 << 22 // values on the stack at once
	maxMarks = 1 << 12 // nesting depth
	maxMemo  = 1 << 22 // memo entries
)

// mark is one MARK on the decoder's mark stack.
type mark struct {
	// stackLen is the value stack's length when the MARK ran: the items pushed after it start there.
	stackLen int
	// offset is the byte offset of the MARK opcode, where a numeric span that starts with this batch begins.
	offset int
}

// decoder is the state of one run of the pickle machine over data:
//
//	data ──(run: one opcode at a time)──▶ execute ──(one method per opcode family)──▶ stack, marks, memo ──STOP──▶ value
type decoder struct {
	// data is the whole pickle; lazy spans (NumSpan, LazyString) are offsets into it.
	data []byte
	// pos is the offset of the next byte to read.
	pos int
	// stack holds the values pushed so far, the newest last.
	stack []any
	// stackOffsets holds, for each value of stack, the offset of the opcode that pushed it (where an APPEND's
	// numeric span starts).
	stackOffsets []int
	// marks holds the MARKs not yet consumed, the newest last.
	marks []mark
	// memo holds the values saved by PUT, BINPUT, LONG_BINPUT and MEMOIZE, by key.
	memo map[uint32]any
	// lazyLists keeps lists of plain numbers as NumSpans instead of items (DecodeOptions.LazyLists).
	lazyLists bool
	// lazyStringMin > 0 keeps UTF-8 strings of at least this many bytes as LazyStrings (DecodeOptions.LazyStrings).
	lazyStringMin int
	// persistentLoad resolves BINPERSID ids; nil refuses them (DecodeOptions.PersistentLoad).
	persistentLoad func(pid any) (any, error)
	// lastNonNumeric is the offset of the last opcode that was not numeric (a number, a memo write, a mark or a
	// framing opcode). A numeric span must start after it, so that re-decoding the span alone gives the same
	// numbers.
	lastNonNumeric int
}

// run executes opcodes until STOP and returns the value on top of the stack.
func (d *decoder) run() (any, error) {
	for {
		off := d.pos
		if d.pos >= len(d.data) {
			return nil, corruptf("pickle truncated: no STOP opcode (%d bytes)", len(d.data))
		}
		op := d.data[d.pos]
		d.pos++
		if op == opStop {
			return d.pop()
		}
		numeric, err := d.execute(op, off)
		if err != nil {
			return nil, err
		}
		if !numeric {
			d.lastNonNumeric = off
		}
	}
}

// execute runs the opcode op read at offset off (d.pos is just past it). numeric reports that the opcode leaves
// a numeric span contiguous across it (see decoder.lastNonNumeric).
func (d *decoder) execute(op opcode, off int) (numeric bool, err error) {
	switch op {
	case opProto, opFrame:
		return true, d.framing(op)
	case opMark, opPop, opPopMark, opDup:
		return d.stackOp(op, off)
	case opNone, opNewTrue, opNewFalse, opBinInt1, opBinInt2, opBinInt, opLong1, opLong4, opBinFloat,
		opInt, opLong, opFloat:
		return d.number(op, off)
	case opBinUnicode, opShortBinUnicode, opBinUnicode8, opUnicode, opBinString, opShortBinString, opString,
		opBinBytes, opShortBinBytes, opBinBytes8, opByteArray8:
		return false, d.text(op, off)
	case opEmptyTuple, opTuple1, opTuple2, opTuple3, opTuple, opEmptyList, opList, opEmptyDict, opDict,
		opEmptySet, opAddItems, opFrozenSet:
		return false, d.container(op, off)
	case opAppend, opAppends, opSetItem, opSetItems:
		return d.fill(op, off)
	case opPut, opBinPut, opLongBinPut, opMemoize:
		return true, d.memoWrite(op, off)
	case opGet, opBinGet, opLongBinGet:
		return false, d.memoRead(op, off)
	case opGlobal, opStackGlobal, opReduce, opNewObj, opNewObjEx, opBuild, opInst, opObj:
		return false, d.callable(op, off)
	case opBinPersID, opPersID:
		return false, d.persistent(op, off)
	case opExt1, opExt2, opExt4:
		// The extension registry maps integer codes to arbitrary callables: never resolved.
		return false, &ForbiddenError{"copyreg", "extension registry code"}
	case opNextBuffer, opReadonlyBuffer:
		return false, corruptf("pickle out-of-band buffers are not supported")
	}
	return false, corruptf("pickle: unknown opcode 0x%02x at byte %d", op, off)
}

// framing handles PROTO (protocols up to 5 are read) and FRAME (a length hint; frames need no handling when
// the whole pickle is in memory).
func (d *decoder) framing(op opcode) error {
	if op == opFrame {
		_, err := d.need(8)
		return err
	}
	p, err := d.need(1)
	if err == nil && p[0] > 5 {
		err = corruptf("unsupported pickle protocol %d", p[0])
	}
	return err
}

// stackOp handles MARK, POP, POP_MARK and DUP. A MARK that opens a batch of plain numbers appended to a lazy
// list is consumed with its batch by fastAppends.
func (d *decoder) stackOp(op opcode, off int) (numeric bool, err error) {
	switch op {
	case opMark:
		if d.lazyLists && d.fastAppends(off) {
			return true, nil
		}
		if len(d.marks) >= maxMarks {
			return true, corruptf("pickle nests deeper than %d", maxMarks)
		}
		d.marks = append(d.marks, mark{len(d.stack), off})
		return true, nil
	case opPop:
		if d.atMark() {
			_, _, err = d.popMark()
		} else {
			_, err = d.pop()
		}
		return false, err
	case opPopMark:
		_, _, err = d.popMark()
		return false, err
	default: // opDup
		v, err := d.top()
		if err != nil {
			return false, err
		}
		return false, d.push(v, off)
	}
}

// number handles the opcodes that push None, a bool, an int or a float. All of them but NONE, LONG4 and the
// text forms are numeric; LONG1 is numeric when its value fits in 64 bits (what scanNumbers re-decodes).
func (d *decoder) number(op opcode, off int) (numeric bool, err error) {
	switch op {
	case opNone:
		return false, d.push(nil, off)
	case opNewTrue:
		return true, d.push(true, off)
	case opNewFalse:
		return true, d.push(false, off)
	case opBinInt1:
		p, err := d.need(1)
		if err != nil {
			return true, err
		}
		return true, d.push(int64(p[0]), off)
	case opBinInt2:
		p, err := d.need(2)
		if err != nil {
			return true, err
		}
		return true, d.push(int64(binary.LittleEndian.Uint16(p)), off)
	case opBinInt:
		p, err := d.need(4)
		if err != nil {
			return true, err
		}
		return true, d.push(signed(uint64(binary.LittleEndian.Uint32(p)), 32), off)
	case opBinFloat:
		p, err := d.need(8)
		if err != nil {
			return true, err
		}
		return true, d.push(math.Float64frombits(binary.BigEndian.Uint64(p)), off)
	case opLong1, opLong4:
		return d.binLong(op, off)
	default: // opInt, opLong, opFloat
		s, err := d.line()
		if err != nil {
			return false, err
		}
		return false, d.pushText(op, s, off)
	}
}

// binLong handles LONG1 and LONG4: a little-endian two's complement integer of at most 64 KiB.
func (d *decoder) binLong(op opcode, off int) (numeric bool, err error) {
	var n int
	if op == opLong1 {
		p, err := d.need(1)
		if err != nil {
			return false, err
		}
		n = int(p[0])
	} else {
		p, err := d.need(4)
		if err != nil {
			return false, err
		}
		n = int(signed(uint64(binary.LittleEndian.Uint32(p)), 32))
	}
	if n > 1<<16 {
		return false, corruptf("pickle LONG of %d bytes", n)
	}
	p, err := d.need(n)
	if err != nil {
		return false, err
	}
	v := decodeLong(p)
	_, fits := v.(int64)
	return fits && op == opLong1, d.push(v, off)
}

// pushText pushes the value of a text-form INT, LONG or FLOAT.
func (d *decoder) pushText(op opcode, s string, off int) error {
	switch op {
	case opInt:
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
	case opLong:
		s = strings.TrimSuffix(s, "L")
		x, ok := new(big.Int).SetString(s, 10)
		if !ok || len(s) > 1<<12 {
			return corruptf("pickle: bad LONG")
		}
		if x.IsInt64() {
			return d.push(x.Int64(), off)
		}
		return d.push(x, off)
	default: // opFloat
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return corruptf("pickle: bad FLOAT %q", s)
		}
		return d.push(f, off)
	}
}

// text handles the opcodes that push a str or bytes value. Python 3 str (BINUNICODE…) becomes a Go string (or
// a LazyString when long), py2 str (BINSTRING, STRING) a Go string of its bytes, bytes and bytearray a []byte.
func (d *decoder) text(op opcode, off int) error {
	switch op {
	case opBinUnicode, opShortBinUnicode, opBinUnicode8:
		n, err := d.length(op)
		if err != nil {
			return err
		}
		start := d.pos
		p, err := d.need(n)
		if err != nil {
			return err
		}
		if d.lazyStringMin > 0 && n >= d.lazyStringMin {
			return d.push(LazyString{Start: start, End: start + n}, off)
		}
		return d.push(pyString(p), off)
	case opUnicode:
		s, err := d.line()
		if err != nil {
			return err
		}
		return d.push(rawUnicodeEscape(s), off)
	case opBinString, opShortBinString:
		n, err := d.length(op)
		if err != nil {
			return err
		}
		p, err := d.need(n)
		if err != nil {
			return err
		}
		return d.push(string(p), off)
	case opString:
		s, err := d.line()
		if err != nil {
			return err
		}
		u, err := strconv.Unquote(s)
		if err != nil {
			if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
				return corruptf("pickle: bad STRING at byte %d", off)
			}
			u = s[1 : len(s)-1]
		}
		return d.push(u, off)
	default: // opBinBytes, opShortBinBytes, opBinBytes8, opByteArray8
		n, err := d.length(op)
		if err != nil {
			return err
		}
		p, err := d.need(n)
		if err != nil {
			return err
		}
		return d.push(append([]byte(nil), p...), off)
	}
}

// container handles the opcodes that build a tuple, list, dict or set from nothing, the top items or the items
// since the mark. Sets are kept as lists.
func (d *decoder) container(op opcode, off int) error {
	switch op {
	case opEmptyTuple:
		return d.push(Tuple{}, off)
	case opTuple1, opTuple2, opTuple3:
		n := int(op - opTuple1 + 1)
		if len(d.stack) < n || (len(d.marks) > 0 && d.marks[len(d.marks)-1].stackLen > len(d.stack)-n) {
			return corruptf("pickle stack underflow at byte %d", off)
		}
		t := append(Tuple(nil), d.stack[len(d.stack)-n:]...)
		d.stack = d.stack[:len(d.stack)-n]
		d.stackOffsets = d.stackOffsets[:len(d.stackOffsets)-n]
		return d.push(t, off)
	case opEmptyList, opEmptySet:
		return d.push(&List{}, off)
	case opEmptyDict:
		return d.push(&Dict{}, off)
	case opAddItems:
		items, _, err := d.popMark()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		l, ok := t.(*List)
		if !ok {
			return corruptf("pickle ADDITEMS on %T", t)
		}
		l.Items = append(l.Items, items...)
		return nil
	}
	// opTuple, opList, opDict, opFrozenSet: the items since the mark
	items, _, err := d.popMark()
	if err != nil {
		return err
	}
	switch op {
	case opTuple:
		return d.push(Tuple(items), off)
	case opDict:
		dict := &Dict{}
		if err := setItems(dict, items); err != nil {
			return err
		}
		return d.push(dict, off)
	default: // opList, opFrozenSet
		return d.push(&List{Items: items}, off)
	}
}

// fill handles APPEND, APPENDS, SETITEM and SETITEMS on the list or dict below their operands. Appending plain
// numbers is numeric, so that the next batch of the same list stays one span.
func (d *decoder) fill(op opcode, off int) (numeric bool, err error) {
	switch op {
	case opAppend:
		itemOffset := 0
		if n := len(d.stackOffsets); n > 0 {
			itemOffset = d.stackOffsets[n-1]
		}
		v, err := d.pop()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		l, ok := t.(*List)
		if !ok {
			return false, corruptf("pickle APPEND on %T at byte %d", t, off)
		}
		if err := d.appendItems(l, []any{v}, itemOffset, d.pos); err != nil {
			return false, err
		}
		return isNumber(v), nil
	case opAppends:
		items, m, err := d.popMark()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		l, ok := t.(*List)
		if !ok {
			return false, corruptf("pickle APPENDS on %T at byte %d", t, off)
		}
		if err := d.appendItems(l, items, m.offset, d.pos); err != nil {
			return false, err
		}
		for _, it := range items {
			if !isNumber(it) {
				return false, nil
			}
		}
		return true, nil
	case opSetItem:
		v, err := d.pop()
		if err != nil {
			return false, err
		}
		k, err := d.pop()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		return false, setItems(t, []any{k, v})
	default: // opSetItems
		items, _, err := d.popMark()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		return false, setItems(t, items)
	}
}

// memoWrite handles PUT, BINPUT, LONG_BINPUT and MEMOIZE: the top of the stack is saved under a key.
func (d *decoder) memoWrite(op opcode, off int) error {
	switch op {
	case opPut:
		s, err := d.line()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return corruptf("pickle: bad PUT at byte %d", off)
		}
		return d.memoPut(uint32(n))
	case opBinPut:
		p, err := d.need(1)
		if err != nil {
			return err
		}
		return d.memoPut(uint32(p[0]))
	case opLongBinPut:
		p, err := d.need(4)
		if err != nil {
			return err
		}
		return d.memoPut(binary.LittleEndian.Uint32(p))
	default: // opMemoize
		n := len(d.memo)
		if n > maxMemo { // never: memoPut keeps the memo within maxMemo entries, so the key fits
			return corruptf("pickle memo exceeds %d entries", maxMemo)
		}
		return d.memoPut(uint32(n))
	}
}

// memoRead handles GET, BINGET and LONG_BINGET: the value saved under a key is pushed again.
func (d *decoder) memoRead(op opcode, off int) error {
	switch op {
	case opGet:
		s, err := d.line()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return corruptf("pickle: bad GET at byte %d", off)
		}
		return d.memoGet(uint32(n), off)
	case opBinGet:
		p, err := d.need(1)
		if err != nil {
			return err
		}
		return d.memoGet(uint32(p[0]), off)
	default: // opLongBinGet
		p, err := d.need(4)
		if err != nil {
			return err
		}
		return d.memoGet(binary.LittleEndian.Uint32(p), off)
	}
}

// callable handles the opcodes that name a class or function and the ones that would call it. This is the
// security boundary (docs/dashboard-api.md "Dumps"): GLOBAL, STACK_GLOBAL and INST resolve the name against the
// allow-list (lookupGlobal) and fail with ForbiddenError for any other; REDUCE, NEWOBJ, NEWOBJ_EX, BUILD, INST
// and OBJ never call anything but run the allow-listed entry's Go constructor (reduce, newObj, build), which
// validates its arguments and returns a plain value.
func (d *decoder) callable(op opcode, off int) error {
	switch op {
	case opGlobal:
		g, err := d.globalFromLines()
		if err != nil {
			return err
		}
		return d.push(g, off)
	case opStackGlobal:
		module, name, err := d.pop2()
		if err != nil {
			return err
		}
		ms, ok1 := module.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return corruptf("pickle STACK_GLOBAL with non-string operands")
		}
		g, err := lookupGlobal(ms, ns)
		if err != nil {
			return err
		}
		return d.push(g, off)
	case opReduce:
		return d.apply2(off, reduce)
	case opNewObj:
		return d.apply2(off, newObj)
	case opNewObjEx:
		kwargs, err := d.pop()
		if err != nil {
			return err
		}
		cls, args, err := d.pop2()
		if err != nil {
			return err
		}
		if kd, ok := kwargs.(*Dict); ok && len(kd.Keys) > 0 {
			return corruptf("pickle NEWOBJ_EX with keyword arguments is not supported")
		}
		v, err := newObj(cls, args)
		if err != nil {
			return err
		}
		return d.push(v, off)
	case opBuild:
		state, err := d.pop()
		if err != nil {
			return err
		}
		obj, err := d.top()
		if err != nil {
			return err
		}
		return build(obj, state)
	case opInst:
		g, err := d.globalFromLines()
		if err != nil {
			return err
		}
		items, _, err := d.popMark()
		if err != nil {
			return err
		}
		v, err := newObj(g, Tuple(items))
		if err != nil {
			return err
		}
		return d.push(v, off)
	default: // opObj
		items, _, err := d.popMark()
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return corruptf("pickle OBJ without a class")
		}
		v, err := newObj(items[0], Tuple(items[1:]))
		if err != nil {
			return err
		}
		return d.push(v, off)
	}
}

// globalFromLines reads the module and name lines of GLOBAL and INST and resolves them against the allow-list.
func (d *decoder) globalFromLines() (*global, error) {
	module, err := d.line()
	if err != nil {
		return nil, err
	}
	name, err := d.line()
	if err != nil {
		return nil, err
	}
	return lookupGlobal(module, name)
}

// persistent handles BINPERSID, resolved by DecodeOptions.PersistentLoad (torch storages of the archive), and
// refuses PERSID.
func (d *decoder) persistent(op opcode, off int) error {
	if op == opPersID {
		return corruptf("pickle text persistent ids are not supported")
	}
	pid, err := d.pop()
	if err != nil {
		return err
	}
	if d.persistentLoad == nil {
		return corruptf("pickle has a persistent id outside a torch archive")
	}
	v, err := d.persistentLoad(pid)
	if err != nil {
		return err
	}
	return d.push(v, off)
}

// need consumes the next n bytes of the pickle.
func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || d.pos+n > len(d.data) || d.pos+n < d.pos {
		return nil, corruptf("pickle truncated at byte %d (need %d more bytes, have %d)", d.pos, n, len(d.data)-d.pos)
	}
	s := d.data[d.pos : d.pos+n]
	d.pos += n
	return s, nil
}

// line consumes a newline-terminated text argument (protocol 0 opcodes) and returns it without the newline.
func (d *decoder) line() (string, error) {
	for i := d.pos; i < len(d.data); i++ {
		if d.data[i] == '\n' {
			s := string(d.data[d.pos:i])
			d.pos = i + 1
			return s, nil
		}
	}
	return "", corruptf("pickle truncated at byte %d: unterminated line", d.pos)
}

// length consumes the length argument of a string or bytes opcode (1, 4 or 8 bytes, by opcode) and checks that
// that many bytes follow.
func (d *decoder) length(op opcode) (int, error) {
	var n uint64
	switch op {
	case opShortBinUnicode, opShortBinBytes, opShortBinString:
		p, err := d.need(1)
		if err != nil {
			return 0, err
		}
		n = uint64(p[0])
	case opBinUnicode, opBinBytes, opBinString:
		p, err := d.need(4)
		if err != nil {
			return 0, err
		}
		if op == opBinString && binary.LittleEndian.Uint32(p) > math.MaxInt32 { // a negative int32
			return 0, corruptf("pickle: negative BINSTRING length")
		}
		n = uint64(binary.LittleEndian.Uint32(p))
	default: // opBinUnicode8, opBinBytes8, opByteArray8
		p, err := d.need(8)
		if err != nil {
			return 0, err
		}
		n = binary.LittleEndian.Uint64(p)
	}
	if n > math.MaxInt || int(n) > len(d.data)-d.pos {
		return 0, corruptf("pickle truncated at byte %d: a %d-byte string does not fit", d.pos, n)
	}
	return int(n), nil
}

// atMark tells whether the topmost mark is at the top of the stack (nothing was pushed since it).
func (d *decoder) atMark() bool {
	return len(d.marks) > 0 && d.marks[len(d.marks)-1].stackLen == len(d.stack)
}

func (d *decoder) push(v any, off int) error {
	if len(d.stack) >= maxStack {
		return corruptf("pickle stack exceeds %d values", maxStack)
	}
	d.stack = append(d.stack, v)
	d.stackOffsets = append(d.stackOffsets, off)
	return nil
}

// pop removes the top value; a mark on top is not a value.
func (d *decoder) pop() (any, error) {
	n := len(d.stack)
	if n == 0 || d.atMark() {
		return nil, corruptf("pickle stack underflow at byte %d", d.pos)
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	d.stackOffsets = d.stackOffsets[:n-1]
	return v, nil
}

// pop2 removes the two top values and returns them in stack order: under (pushed first), then top.
func (d *decoder) pop2() (under, top any, err error) {
	if top, err = d.pop(); err != nil {
		return nil, nil, err
	}
	if under, err = d.pop(); err != nil {
		return nil, nil, err
	}
	return under, top, nil
}

// apply2 replaces the two top values with fn(under, top): REDUCE (callable, args) and NEWOBJ (class, args).
func (d *decoder) apply2(off int, fn func(under, top any) (any, error)) error {
	under, top, err := d.pop2()
	if err != nil {
		return err
	}
	v, err := fn(under, top)
	if err != nil {
		return err
	}
	return d.push(v, off)
}

// top returns the top value without removing it.
func (d *decoder) top() (any, error) {
	n := len(d.stack)
	if n == 0 || d.atMark() {
		return nil, corruptf("pickle stack empty at byte %d", d.pos)
	}
	return d.stack[n-1], nil
}

// popMark pops everything since the last MARK, and the mark.
func (d *decoder) popMark() ([]any, mark, error) {
	if len(d.marks) == 0 {
		return nil, mark{}, corruptf("pickle: no MARK before byte %d", d.pos)
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := append([]any(nil), d.stack[m.stackLen:]...)
	d.stack = d.stack[:m.stackLen]
	d.stackOffsets = d.stackOffsets[:m.stackLen]
	return items, m, nil
}

func (d *decoder) memoPut(key uint32) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	if _, ok := d.memo[key]; !ok && len(d.memo) >= maxMemo {
		return corruptf("pickle memo exceeds %d entries", maxMemo)
	}
	d.memo[key] = v
	return nil
}

func (d *decoder) memoGet(key uint32, off int) error {
	v, ok := d.memo[key]
	if !ok {
		return corruptf("pickle: memo key %d missing at byte %d", key, off)
	}
	return d.push(v, off)
}

// setItems sets key/value pairs (items alternate keys and values) on a dict or on an allow-listed record's state.
func setItems(t any, items []any) error {
	if len(items)%2 != 0 {
		return corruptf("pickle SETITEMS with an odd number of items")
	}
	switch x := t.(type) {
	case *Dict:
		for i := 0; i+1 < len(items); i += 2 {
			x.set(items[i], items[i+1])
		}
		return nil
	case *Object:
		for i := 0; i+1 < len(items); i += 2 {
			x.State.set(items[i], items[i+1])
		}
		return nil
	}
	return corruptf("pickle SETITEM on %T", t)
}

// pyString decodes Python's "surrogatepass" UTF-8 leniently: invalid bytes become U+FFFD.
func pyString(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return strings.ToValidUTF8(string(p), "\uFFFD")
}

// rawUnicodeEscape decodes the \uXXXX and \UXXXXXXXX escapes of a protocol 0 UNICODE argument.
func rawUnicodeEscape(s string) string {
	if !strings.Contains(s, `\u`) && !strings.Contains(s, `\U`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			w := 4
			if s[i+1] == 'U' {
				w = 8
			}
			if i+2+w <= len(s) {
				if r, err := strconv.ParseUint(s[i+2:i+2+w], 16, 32); err == nil {
					c := utf8.RuneError // what WriteRune writes for any number that is no code point
					if r <= unicode.MaxRune {
						c = rune(r)
					}
					b.WriteRune(c)
					i += 1 + w
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
