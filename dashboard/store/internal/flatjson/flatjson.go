// Package flatjson reads the one-line JSON records of the run's streams without building them: the members of
// a flat object as raw keys and values, and numbers exactly as strconv.ParseFloat reads them, faster.
package flatjson

import (
	"bytes"
	"errors"
	"strconv"
)

// ErrBadLine is a line that is not a JSON object.
var ErrBadLine = errors.New("not a flat JSON object")

// Members reads the top-level members of a one-line JSON object one at a time, without building it: each key
// and raw value (strings without quotes and unescaped only when they contain no escapes; objects and arrays as
// raw text). It is the hot path of every stream's lines, several times faster than encoding/json.
//
//	m := flatjson.NewMembers(line)
//	for key, val, str, ok := m.Next(); ok; key, val, str, ok = m.Next() {
//		use(key, val, str)
//	}
//	if m.Err() != nil { … not a flat JSON object … }
//
// Next is one loop that calls nothing back: the stream's parser reads the members in its own loop.
type Members struct {
	line []byte
	// i is where reading goes on; at is where the last value read starts.
	i, at   int
	started bool
	// done: the object was read to its end; err: it is not a flat JSON object.
	done bool
	err  error
}

// NewMembers reads the members of line.
func NewMembers(line []byte) Members { return Members{line: line} }

// Next returns the next member's key and raw value, and whether the value is a string (val is then its text
// without the quotes); ok is false after the last member or at the first syntax error (Err).
func (m *Members) Next() (key, val []byte, str, ok bool) { return m.next(false) }

// NextShallow is Next that leaves an object or array value unread: val is then the line from the value's start
// to its end, and the caller, having read the value itself, goes on with SkipTo (the index in the line just past
// it). A bundle's "spans" array is so read once, by its reader, rather than walked once more to be skipped.
func (m *Members) NextShallow() (key, val []byte, str, ok bool) { return m.next(true) }

// SkipTo goes on after a value NextShallow left unread, at index end of the line.
func (m *Members) SkipTo(end int) { m.i = end }

// At is the index in the line where the value Next or NextShallow returned last starts.
func (m *Members) At() int { return m.at }

func (m *Members) next(shallow bool) (key, val []byte, str, ok bool) {
	if m.done || m.err != nil {
		return nil, nil, false, false
	}
	b, i := m.line, m.i
	var ke, j int
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	switch {
	case !m.started && (i >= len(b) || b[i] != '{'):
		goto bad
	case !m.started:
		m.started = true
	case i < len(b) && b[i] == ',':
	case i < len(b) && b[i] == '}':
		m.done, m.i = true, i+1
		return nil, nil, false, false
	default:
		goto bad
	}
	i++
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i < len(b) && b[i] == '}' { // "{}", and ",}" read as the end, as Scan always read it
		m.done, m.i = true, i+1
		return nil, nil, false, false
	}
	if i >= len(b) || b[i] != '"' {
		goto bad
	}
	if ke = bytes.IndexByte(b[i+1:], '"'); ke < 0 {
		goto bad
	}
	key = b[i+1 : i+1+ke]
	i += 2 + ke
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i >= len(b) || b[i] != ':' {
		goto bad
	}
	i++
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i >= len(b) {
		goto bad
	}
	j = i
	m.at = i
	switch b[i] {
	case '"':
		if j = closingQuote(b, j); j < 0 {
			goto bad
		}
		m.i = j + 1
		return key, b[i+1 : j], true, true
	case '{', '[': // to the bracket that closes it
		if shallow {
			m.i = len(b)
			return key, b[i:], false, true
		}
		e, err := SkipValue(b, i)
		if err != nil {
			goto bad
		}
		m.i = e
		return key, b[i:e], false, true
	default:
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ' {
			j++
		}
		m.i = j
		return key, b[i:j], false, true
	}
bad:
	m.err = ErrBadLine
	return nil, nil, false, false
}

// End is the index just past the object's closing brace once Next returned false with no error: where what
// follows the object starts, when the object is one value inside a larger text (a member of an array).
func (m *Members) End() int { return m.i }

// Err is ErrBadLine when the line is not a flat JSON object (the members before the error were read), nil
// otherwise.
func (m *Members) Err() error { return m.err }

// Scan calls fn with each member of a one-line JSON object (Members), for the parsers that keep a few keys.
func Scan(line []byte, fn func(key, val []byte, str bool)) error {
	m := NewMembers(line)
	for key, val, str, ok := m.Next(); ok; key, val, str, ok = m.Next() {
		fn(key, val, str)
	}
	return m.Err()
}

// SkipSpace returns the index of the first byte at or after i that is not JSON white space (a line holds no
// newline).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the index just past the object or array starting at b[i], or ErrBadLine when it is not closed.
// A string inside is crossed by a search for its closing quote (a quote after an even run of backslashes), not
// byte by byte: the records' values are mostly hex ids and names.
func SkipValue(b []byte, i int) (int, error) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			if i = closingQuote(b, i); i < 0 {
				return 0, ErrBadLine
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, ErrBadLine
}

// closingQuote is the index of the quote that closes the string opening at b[i] (a quote after an even run of
// backslashes), found by a byte search rather than byte by byte; -1 when it is not closed.
func closingQuote(b []byte, i int) int {
	for {
		k := bytes.IndexByte(b[i+1:], '"')
		if k < 0 {
			return -1
		}
		i += 1 + k
		bs := 0
		for p := i - 1; b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return i
		}
	}
}

// ParseNum reads a JSON number (false for null and anything else), bit for bit what strconv.ParseFloat reads.
// Two fast paths, taken in one pass over the bytes: an integer of at most 15 digits, and digits.digits with at
// most 16 digits and a significand up to 2^53 — the significand is then exact in a float64 and so is the power
// of ten, and one correctly rounded division gives exactly what strconv.ParseFloat gives (Clinger's fast path)
// without its generality. GPU readings ("93.6") and µs timestamps ("1796121314.391427") look like this.
func ParseNum(b []byte) (float64, bool) {
	if len(b) == 0 || b[0] == 'n' { // null
		return 0, false
	}
	neg := b[0] == '-'
	s := b
	if neg {
		s = s[1:]
	}
	var m int64
	digits, frac, dot, plain := 0, 0, false, len(s) > 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + int64(c-'0') // wraps past 18 digits: such a number takes strconv below
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			plain = false
		}
		if !plain {
			break
		}
	}
	switch {
	case plain && !dot && digits < 16:
		if neg {
			m = -m // "-0" reads as 0 here
		}
		return float64(m), true
	case plain && dot && frac > 0 && digits > frac && digits <= 16 && m <= 1<<53:
		f := float64(m) / exactPow10[frac]
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil
}

// ReadNum reads the number starting at b[i], raw up to what ends a value for Scan (',', '}' or a space), as
// ParseNum reads it, with ParseNum's fast paths taken while its bytes are walked (one pass: the hot path of a
// cold open parses every reading of a run this way). It also gives the value in hundredths, q, where the digits
// give them exactly (exact; columns.Values.AppendQuantum's quantum, which gives the same for every such value
// but -0, which it stores raw). end is the index past the raw value; ok is false when it is not a number (null,
// true, …), end then still past it.
func ReadNum(b []byte, i int) (end int, v float64, q int64, exact, ok bool) {
	j := i
	neg := b[j] == '-'
	if neg {
		j++
	}
	d0 := j
	var m int64
	for j < len(b) && b[j]-'0' < 10 {
		m = m*10 + int64(b[j]-'0') // wraps past 18 digits: such a number is left to ParseNum below
		j++
	}
	ip, frac, dot := j-d0, 0, false
	if j < len(b) && b[j] == '.' {
		dot = true
		j++
		f0 := j
		for j < len(b) && b[j]-'0' < 10 {
			m = m*10 + int64(b[j]-'0')
			j++
		}
		frac = j - f0
	}
	switch {
	case j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ':
		// Not digits[.digits] up to what ends a raw value for Scan (an exponent, null, …).
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ' {
			j++
		}
		v, ok = ParseNum(b[i:j])
		return j, v, 0, false, ok
	case !dot && ip > 0 && ip < 16:
		// ParseNum's integer path; in hundredths exactly.
		if neg {
			m = -m
		}
		return j, float64(m), m * 100, ip < 14, true
	case dot && frac > 0 && ip > 0 && ip+frac <= 16 && m <= 1<<53:
		// ParseNum's decimal path (ParseNum's second): one correctly rounded division. With at most two decimals the
		// hundredths are the digits.
		v = float64(m) / exactPow10[frac]
		if frac <= 2 && ip+frac < 14 && (!neg || m != 0) {
			q, exact = m*int64(exactPow10[2-frac]), true
		}
		if neg {
			v, q = -v, -q
		}
		return j, v, q, exact, true
	}
	v, ok = ParseNum(b[i:j])
	return j, v, 0, false, ok
}

// exactPow10 are the powers of ten exact in a float64 (ParseNum and ReadNum divide by them).
var exactPow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16}
