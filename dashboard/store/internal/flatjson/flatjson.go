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

// Scan walks the top-level members of a one-line JSON object without building it, calling fn with each
// key and raw value (strings without quotes and unescaped only when they contain no escapes; objects and
// arrays as raw text). It is the hot path for gpu_util lines, several times faster than encoding/json.
func Scan(line []byte, fn func(key, val []byte, str bool)) error {
	i := SkipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return ErrBadLine
	}
	i++
	for {
		i = SkipSpace(line, i)
		if i < len(line) && line[i] == '}' {
			return nil
		}
		if i >= len(line) || line[i] != '"' {
			return ErrBadLine
		}
		ke := bytes.IndexByte(line[i+1:], '"')
		if ke < 0 {
			return ErrBadLine
		}
		key := line[i+1 : i+1+ke]
		i = SkipSpace(line, i+2+ke)
		if i >= len(line) || line[i] != ':' {
			return ErrBadLine
		}
		i = SkipSpace(line, i+1)
		if i >= len(line) {
			return ErrBadLine
		}
		var end int
		str := false
		switch line[i] {
		case '"':
			j := i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(line) {
				return ErrBadLine
			}
			fn(key, line[i+1:j], true)
			str = true
			end = j + 1
		case '{', '[':
			j, err := SkipValue(line, i)
			if err != nil {
				return err
			}
			fn(key, line[i:j], false)
			end = j
		default:
			j := i
			for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ' ' {
				j++
			}
			fn(key, line[i:j], false)
			end = j
		}
		_ = str
		i = SkipSpace(line, end)
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		if i < len(line) && line[i] == '}' {
			return nil
		}
		return ErrBadLine
	}
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
func SkipValue(b []byte, i int) (int, error) {
	depth := 0
	inStr := false
	for ; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
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

// ParseNum reads a JSON number (false for null and anything else), bit for bit what strconv.ParseFloat reads.
func ParseNum(b []byte) (float64, bool) {
	if len(b) == 0 || b[0] == 'n' { // null
		return 0, false
	}
	// Fast path for plain integers.
	neg := b[0] == '-'
	s := b
	if neg {
		s = s[1:]
	}
	if len(s) > 0 && len(s) < 16 {
		var n int64
		ok := true
		for _, c := range s {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if ok {
			if neg {
				n = -n
			}
			return float64(n), true
		}
	}
	if f, ok := parseDecimal(s); ok {
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
		// ParseNum's decimal path (parseDecimal): one correctly rounded division. With at most two decimals the
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

// parseDecimal reads digits.digits with at most 16 digits and a significand up to 2^53: the significand is then
// exact in a float64 and so is the power of ten, and one correctly rounded division gives exactly what
// strconv.ParseFloat gives (Clinger's fast path) without its generality — GPU readings ("93.6") and µs
// timestamps ("1796121314.391427") look like this.
func parseDecimal(s []byte) (float64, bool) {
	var m int64
	digits, frac, dot := 0, 0, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + int64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if !dot || frac == 0 || digits == frac || digits > 16 || m > 1<<53 || s[0] == '.' {
		return 0, false
	}
	return float64(m) / exactPow10[frac], true
}
