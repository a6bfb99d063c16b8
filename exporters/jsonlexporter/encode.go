package jsonlexporter

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// obj appends one compact JSON object to a byte slice without reflection: the hot path of the exporter.
// Fields are written in call order; the caller guarantees keys are unique and need no escaping.
type obj struct {
	b     []byte
	first bool
}

func beginObj(b []byte) obj { return obj{b: append(b, '{'), first: true} }

func (o *obj) key(k string) {
	if o.first {
		o.first = false
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *obj) str(k, v string)                    { o.key(k); o.b = appendString(o.b, v) }
func (o *obj) int(k string, v int64)              { o.key(k); o.b = strconv.AppendInt(o.b, v, 10) }
func (o *obj) uint(k string, v uint64)            { o.key(k); o.b = strconv.AppendUint(o.b, v, 10) }
func (o *obj) float(k string, v float64)          { o.key(k); o.b = appendFloat(o.b, v) }
func (o *obj) time(k string, t pcommon.Timestamp) { o.key(k); o.b = appendTime(o.b, t) }
func (o *obj) null(k string)                      { o.key(k); o.b = append(o.b, "null"...) }

func (o *obj) traceID(k string, id pcommon.TraceID) { o.key(k); o.b = appendID(o.b, id[:]) }
func (o *obj) spanID(k string, id pcommon.SpanID)   { o.key(k); o.b = appendID(o.b, id[:]) }

// appendID writes a trace or span id as a lowercase hex string, the form OTLP/JSON uses.
func appendID(b, id []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, id)
	return append(b, '"')
}

// line closes the object and terminates the record.
func (o *obj) line() []byte { return append(o.b, '}', '\n') }

// appendTime writes Unix seconds with up to 6 decimals (µs), trailing zeros trimmed: exact, short, and the
// float-seconds form miles readers expect.
func appendTime(b []byte, t pcommon.Timestamp) []byte {
	ns := uint64(t)
	b = strconv.AppendUint(b, ns/1e9, 10)
	return appendMicros(b, (ns%1e9)/1e3)
}

// appendMicros writes the fraction of a second ".dddddd" for us < 1e6, trailing zeros trimmed, nothing for 0.
func appendMicros(b []byte, us uint64) []byte {
	if us == 0 {
		return b
	}
	var d [7]byte
	d[0] = '.'
	for i := 6; i >= 1; i-- {
		d[i] = byte('0' + us%10)
		us /= 10
	}
	n := 7
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// appendFloat writes the shortest representation that round-trips; JSON has no NaN or Inf, so they are null.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	// As encoding/json does: plain decimals unless the exponent is extreme, so 461190766.9 stays readable.
	if a := math.Abs(v); a < 1e-6 || a >= 1e21 {
		return strconv.AppendFloat(b, v, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// round1 keeps one decimal: percentages and watts are printed that way by every GPU tool, and the
// extra digits would only cost bytes.
func round1(v float64) float64 { return math.Round(v*10) / 10 }

const hexDigits = "0123456789abcdef"

// appendString writes a JSON string; invalid UTF-8 becomes U+FFFD so a line is always valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendValue writes any OTLP value as JSON: maps become objects, slices arrays, bytes base64.
// depth bounds recursion so a hostile, deeply nested value cannot exhaust the stack.
func appendValue(b []byte, v pcommon.Value, depth int) []byte {
	if depth > 16 {
		return append(b, "null"...)
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendString(b, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(b, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendFloat(b, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(b, v.Bool())
	case pcommon.ValueTypeBytes:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes().AsRaw())
		return append(b, '"')
	case pcommon.ValueTypeSlice:
		return appendSlice(b, v.Slice(), depth+1)
	case pcommon.ValueTypeMap:
		return appendMap(b, v.Map(), depth+1, nil)
	default:
		return append(b, "null"...)
	}
}

// appendSlice writes a slice as a JSON array.
func appendSlice(b []byte, s pcommon.Slice, depth int) []byte {
	b = append(b, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendValue(b, s.At(i), depth)
	}
	return append(b, ']')
}

// appendMap writes a map as a JSON object, skipping keys for which skip returns true.
func appendMap(b []byte, m pcommon.Map, depth int, skip func(string) bool) []byte {
	b = append(b, '{')
	first := true
	for k, v := range m.All() {
		if skip != nil && skip(k) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValue(b, v, depth)
	}
	return append(b, '}')
}
