package flatjson

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseNum: whenever ParseNum reads a number, strconv.ParseFloat reads the same bits (the decimal fast
// path must be exact, not close).
func FuzzParseNum(f *testing.F) {
	for _, s := range []string{"93.6", "478.4", "-0.1", "0.30000000000000004", "123456789012.345", "99999999999999.9", "1796121314.391427", "9007199254740993.0", "1e5", "12", "-7", ".5", "5.", "0.1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseNum(b)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil || got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%q: ParseNum %v, strconv %v (%v)", b, got, want, err)
		}
	})
}

// FuzzReadNum: ReadNum, up to what ends a raw value, reads what ParseNum reads of the same bytes, bit for bit,
// and its hundredths, where it says they are exact, are the value's.
func FuzzReadNum(f *testing.F) {
	for _, s := range []string{"93.6,", "478.4}", "-0.1 ", "-0.00", "12", "-7,", "1e5}", "null,", "true", "5.", "0.1", "99999999999999.99", "123456789012345678901"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		end, v, q, exact, ok := ReadNum(b, 0)
		raw := b[:end]
		if end < len(b) && b[end] != ',' && b[end] != '}' && b[end] != ' ' {
			t.Fatalf("%q: ends at %d, not at what ends a raw value", b, end)
		}
		want, wantOK := ParseNum(raw)
		if ok != wantOK || ok && math.Float64bits(v) != math.Float64bits(want) && !(math.IsNaN(v) && math.IsNaN(want)) {
			t.Fatalf("%q: ReadNum %v %v, ParseNum %v %v", raw, v, ok, want, wantOK)
		}
		if exact && float64(q)/100 != math.Round(v*100)/100 {
			t.Fatalf("%q: hundredths %d of %v", raw, q, v)
		}
	})
}

// FuzzMembers: on a flat object encoding/json reads (no escaped keys, no repeated keys), Members gives its
// keys in order, each value as encoding/json's raw text (a string's without quotes), and no error. A tab or CR
// is white space our writers never put in a line; a raw value ends only at ',', '}' or ' ' (ReadNum's rule).
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"ts":1796121314.391427,"node":"n0","gpu":3,"util":93.6}`, `{}`, ` { "a" : [1,{"b":"]"}] , "c":{"d":"x\"y"},"e":null,"f":true}`, `{"a":"\\"}`, `{"a":1,}`, `[1]`, `{"a":1`, `{"a":"x`, `{"a":{"b":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []string
		m := NewMembers(b)
		for key, val, _, ok := m.Next(); ok; key, val, _, ok = m.Next() {
			got = append(got, string(key), string(val))
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) != nil || bytes.ContainsAny(b, "\n\t\r") || !utf8.Valid(b) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(b))
		if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
			return // not an object (null reads into a map too)
		}
		var want []string
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return
			}
			var raw json.RawMessage
			if d.Decode(&raw) != nil {
				return
			}
			key := k.(string)
			if bytes.Contains(b, []byte(`\u`)) || strings.ContainsAny(key, `"\`) || len(got) > len(want) && strings.Contains(got[len(want)], `\`) {
				return // an escaped key, or text encoding/json unescapes: the parsers fall back for those
			}
			v := string(raw)
			if len(raw) > 0 && raw[0] == '"' {
				v = v[1 : len(v)-1]
			}
			want = append(want, key, v)
		}
		if len(want) != 2*len(obj) {
			return // a repeated key
		}
		if m.Err() != nil || !slices.Equal(got, want) {
			t.Fatalf("%q: Members %q (err %v), encoding/json %q", b, got, m.Err(), want)
		}
	})
}
