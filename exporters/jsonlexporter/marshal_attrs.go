package jsonlexporter

import "go.opentelemetry.io/collector/pdata/pcommon"

// attribute helpers: absent or mistyped attributes read as "unknown" instead of failing the record.

func attrStr(m pcommon.Map, k string) (string, bool) {
	v, ok := m.Get(k)
	if !ok {
		return "", false
	}
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str(), true
	}
	return v.AsString(), true
}

func attrInt(m pcommon.Map, k string) (int64, bool) {
	v, ok := m.Get(k)
	if !ok {
		return 0, false
	}
	return valueInt(v)
}

func valueInt(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != d || d > 9.2e18 || d < -9.2e18 {
			return 0, false
		}
		return int64(d), true
	case pcommon.ValueTypeStr:
		return parseInt(v.Str())
	}
	return 0, false
}

func parseInt(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
		if s == "" {
			return 0, false
		}
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// attrSlice returns the slice attribute k, or an empty (valid) slice when it is absent or not a slice.
func attrSlice(m pcommon.Map, k string) pcommon.Slice {
	if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeSlice {
		return v.Slice()
	}
	return pcommon.NewSlice()
}
