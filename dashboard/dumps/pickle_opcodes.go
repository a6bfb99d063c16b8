package dumps

// opcode is one instruction of the pickle virtual machine. The constants carry the names of CPython's pickle.py
// and pickletools (opMark is MARK, opStackGlobal is STACK_GLOBAL, …), grouped by the protocol that introduced
// them; the decoder (pickle_decoder.go) handles them by family, one method per family.
type opcode = byte

// Protocol 0 and 1.
const (
	opMark           opcode = '(' // MARK: push a mark onto the stack
	opStop           opcode = '.' // STOP: the top of the stack is the result
	opPop            opcode = '0' // POP: discard the top item (or the topmost mark)
	opPopMark        opcode = '1' // POP_MARK: discard everything since the topmost mark
	opDup            opcode = '2' // DUP: push the top item again
	opFloat          opcode = 'F' // FLOAT: float as decimal text
	opInt            opcode = 'I' // INT: int as decimal text ("00"/"01" are False/True)
	opBinInt         opcode = 'J' // BININT: 4-byte signed int
	opBinInt1        opcode = 'K' // BININT1: 1-byte unsigned int
	opLong           opcode = 'L' // LONG: long as decimal text
	opBinInt2        opcode = 'M' // BININT2: 2-byte unsigned int
	opNone           opcode = 'N' // NONE
	opPersID         opcode = 'P' // PERSID: persistent id as text
	opBinPersID      opcode = 'Q' // BINPERSID: persistent id from the stack
	opReduce         opcode = 'R' // REDUCE: call a callable with an argument tuple
	opString         opcode = 'S' // STRING: quoted py2 str as text
	opBinString      opcode = 'T' // BINSTRING: py2 str, 4-byte length
	opShortBinString opcode = 'U' // SHORT_BINSTRING: py2 str, 1-byte length
	opUnicode        opcode = 'V' // UNICODE: raw-unicode-escape text
	opBinUnicode     opcode = 'X' // BINUNICODE: UTF-8, 4-byte length
	opAppend         opcode = 'a' // APPEND: append the top item to the list below it
	opBuild          opcode = 'b' // BUILD: set an object's state (__setstate__)
	opGlobal         opcode = 'c' // GLOBAL: push module.name, both as text lines
	opDict           opcode = 'd' // DICT: dict of the key/value pairs since the mark
	opEmptyDict      opcode = '}' // EMPTY_DICT
	opAppends        opcode = 'e' // APPENDS: extend the list below the mark
	opGet            opcode = 'g' // GET: memo read, decimal text key
	opBinGet         opcode = 'h' // BINGET: memo read, 1-byte key
	opInst           opcode = 'i' // INST: instantiate module.name with the items since the mark
	opLongBinGet     opcode = 'j' // LONG_BINGET: memo read, 4-byte key
	opList           opcode = 'l' // LIST: list of the items since the mark
	opEmptyList      opcode = ']' // EMPTY_LIST
	opObj            opcode = 'o' // OBJ: instantiate the class after the mark with the rest as arguments
	opPut            opcode = 'p' // PUT: memo write, decimal text key
	opBinPut         opcode = 'q' // BINPUT: memo write, 1-byte key
	opLongBinPut     opcode = 'r' // LONG_BINPUT: memo write, 4-byte key
	opSetItem        opcode = 's' // SETITEM: set one key/value pair on the dict below them
	opTuple          opcode = 't' // TUPLE: tuple of the items since the mark
	opEmptyTuple     opcode = ')' // EMPTY_TUPLE
	opSetItems       opcode = 'u' // SETITEMS: set the key/value pairs since the mark on the dict below it
	opBinFloat       opcode = 'G' // BINFLOAT: 8-byte big-endian IEEE double
)

// Protocol 2.
const (
	opProto    opcode = 0x80 // PROTO: protocol version
	opNewObj   opcode = 0x81 // NEWOBJ: cls.__new__(cls, *args)
	opExt1     opcode = 0x82 // EXT1: copyreg extension registry, 1-byte code
	opExt2     opcode = 0x83 // EXT2: copyreg extension registry, 2-byte code
	opExt4     opcode = 0x84 // EXT4: copyreg extension registry, 4-byte code
	opTuple1   opcode = 0x85 // TUPLE1: tuple of the top item
	opTuple2   opcode = 0x86 // TUPLE2: tuple of the top two items
	opTuple3   opcode = 0x87 // TUPLE3: tuple of the top three items
	opNewTrue  opcode = 0x88 // NEWTRUE
	opNewFalse opcode = 0x89 // NEWFALSE
	opLong1    opcode = 0x8a // LONG1: little-endian two's complement long, 1-byte length
	opLong4    opcode = 0x8b // LONG4: little-endian two's complement long, 4-byte length
)

// Protocol 3.
const (
	opBinBytes      opcode = 'B' // BINBYTES: bytes, 4-byte length
	opShortBinBytes opcode = 'C' // SHORT_BINBYTES: bytes, 1-byte length
)

// Protocol 4.
const (
	opShortBinUnicode opcode = 0x8c // SHORT_BINUNICODE: UTF-8, 1-byte length
	opBinUnicode8     opcode = 0x8d // BINUNICODE8: UTF-8, 8-byte length
	opBinBytes8       opcode = 0x8e // BINBYTES8: bytes, 8-byte length
	opEmptySet        opcode = 0x8f // EMPTY_SET
	opAddItems        opcode = 0x90 // ADDITEMS: add the items since the mark to the set below it
	opFrozenSet       opcode = 0x91 // FROZENSET: frozenset of the items since the mark
	opNewObjEx        opcode = 0x92 // NEWOBJ_EX: cls.__new__(cls, *args, **kwargs)
	opStackGlobal     opcode = 0x93 // STACK_GLOBAL: push module.name, both strings from the stack
	opMemoize         opcode = 0x94 // MEMOIZE: memo write at the next free key
	opFrame           opcode = 0x95 // FRAME: 8-byte frame length (a framing hint)
)

// Protocol 5.
const (
	opByteArray8     opcode = 0x96 // BYTEARRAY8: bytearray, 8-byte length
	opNextBuffer     opcode = 0x97 // NEXT_BUFFER: out-of-band buffer
	opReadonlyBuffer opcode = 0x98 // READONLY_BUFFER: make the top buffer read-only
)
