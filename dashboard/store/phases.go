package store

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"
)

// phaseRec is one phases record: otelcol-miles (t1 null = open, span id) or miles v1 (t1 = -1 = open, no id).
type phaseRec struct {
	Name   string   `json:"name"`
	T0     float64  `json:"t0"`
	T1     *float64 `json:"t1"`
	Node   string   `json:"node"`
	Rank   int      `json:"rank"`
	Role   string   `json:"role"`
	GPUs   []int    `json:"gpus"`
	Step   *int     `json:"step"`
	Span   string   `json:"span"`
	Parent string   `json:"parent"`
}

func (p *phaseRec) open() bool { return p.T1 == nil || *p.T1 < 0 }

// identity matches an open marker with its closed record: the span id, or for v1 records (node, rank, name, t0).
func (p *phaseRec) identity() string {
	if p.Span != "" {
		return p.Span
	}
	return p.Node + "\x00" + itoa(p.Rank) + "\x00" + p.Name + "\x00" + ftoa(p.T0)
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

// phaseBlock holds one hour of phases records.
type phaseBlock struct {
	closed []phaseRec
	open   []phaseRec
	maxT   float64
}

func (b *phaseBlock) addLine(line []byte) bool {
	r, ok := parsePhaseFast(line)
	if !ok {
		r = phaseRec{Rank: -1}
		if err := json.Unmarshal(line, &r); err != nil {
			return false
		}
	}
	if r.Name == "" || r.T0 <= 0 {
		return false
	}
	if r.open() {
		b.open = append(b.open, r)
		b.maxT = math.Max(b.maxT, r.T0)
	} else {
		b.closed = append(b.closed, r)
		b.maxT = math.Max(b.maxT, *r.T1)
	}
	return true
}

// parsePhaseFast decodes the records the exporter writes without encoding/json (which was most of a cold
// fleet overview's time after the roll-up: ~0.9 s for the hours of phases a window reads). It gives up —
// false, and the caller decodes with encoding/json, so the result is the same — on anything it is not sure
// of: escaped or non-UTF-8 strings or keys, a number that is not a plain JSON number, a key differing from a
// known one only in case, an unexpected type. (Members it does not use are skipped, not validated.)
func parsePhaseFast(line []byte) (phaseRec, bool) {
	r := phaseRec{Rank: -1}
	ok := true
	str := func(val []byte, isStr bool, dst *string) {
		switch {
		case isStr && bytes.IndexByte(val, '\\') < 0 && utf8.Valid(val):
			*dst = string(val)
		case !isStr && string(val) == "null":
		default:
			ok = false
		}
	}
	num := func(val []byte, isStr bool) (float64, bool) {
		if isStr || !jsonNumber(val) {
			ok = false
			return 0, false
		}
		v, good := parseNum(val)
		if !good {
			ok = false
		}
		return v, good
	}
	integer := func(val []byte, isStr bool) (int, bool) {
		if isStr || !jsonInt(val) {
			ok = false
			return 0, false
		}
		v, good := parseNum(val)
		if !good || math.Abs(v) > 1<<53 {
			ok = false
			return 0, false
		}
		return int(v), true
	}
	err := scanFlat(line, func(key, val []byte, isStr bool) {
		if !ok {
			return
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			ok = false // an escaped key: encoding/json unescapes it
			return
		}
		null := !isStr && string(val) == "null"
		switch string(key) {
		case "name":
			str(val, isStr, &r.Name)
		case "node":
			str(val, isStr, &r.Node)
		case "role":
			str(val, isStr, &r.Role)
		case "span":
			str(val, isStr, &r.Span)
		case "parent":
			str(val, isStr, &r.Parent)
		case "t0":
			if !null {
				r.T0, _ = num(val, isStr)
			}
		case "t1":
			if null {
				r.T1 = nil
			} else if v, good := num(val, isStr); good {
				r.T1 = &v
			}
		case "rank":
			if !null {
				r.Rank, _ = integer(val, isStr)
			}
		case "step":
			if null {
				r.Step = nil
			} else if v, good := integer(val, isStr); good {
				r.Step = &v
			}
		case "gpus":
			if null {
				r.GPUs = nil
				return
			}
			if isStr || len(val) < 2 || val[0] != '[' || val[len(val)-1] != ']' {
				ok = false
				return
			}
			r.GPUs = []int{}
			for _, part := range bytes.Split(val[1:len(val)-1], []byte{','}) {
				part = bytes.TrimSpace(part)
				if len(part) == 0 && len(r.GPUs) == 0 && len(bytes.TrimSpace(val[1:len(val)-1])) == 0 {
					break // []
				}
				v, good := integer(part, false)
				if !good {
					return
				}
				r.GPUs = append(r.GPUs, v)
			}
		default:
			for _, k := range phaseKeys {
				if strings.EqualFold(string(key), k) {
					ok = false // encoding/json would match it case-insensitively
				}
			}
		}
	})
	return r, ok && err == nil
}

var phaseKeys = []string{"name", "t0", "t1", "node", "rank", "role", "gpus", "step", "span", "parent"}

// jsonNumber: -?digits[.digits][e[+-]digits] (what encoding/json accepts; parseNum would also take "NaN").
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d || (b[d] == '0' && i-d > 1) {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == f {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		e := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == e {
			return false
		}
	}
	return i == len(b)
}

// jsonInt: a JSON number without fraction or exponent (what encoding/json decodes into an int).
func jsonInt(b []byte) bool {
	return jsonNumber(b) && bytes.IndexAny(b, ".eE") < 0
}
