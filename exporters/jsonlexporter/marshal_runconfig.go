package jsonlexporter

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// appendRunConfig writes one run_config record (docs/semconv.md §11, §8.3):
// {"ts":…,"node":…,"service":…,"pid":…,"args":{…},"redacted":[…],"truncated":[…],"dropped":n}. The secret rule is
// applied again here, whoever sent the record. A body without an args map counts as invalid, one over the
// ingest limits as over_limit; neither is written.
func appendRunConfig(b []byte, r *records, ts pcommon.Timestamp, res pcommon.Map, body pcommon.Value) ([]byte, bool) {
	if body.Type() != pcommon.ValueTypeMap {
		r.invalid++
		return b, false
	}
	bm := body.Map()
	av, ok := bm.Get("args")
	if !ok || av.Type() != pcommon.ValueTypeMap {
		r.invalid++
		return b, false
	}
	args := av.Map()
	if broken := checkRunConfig(args); broken != "" {
		r.overLimit(1, broken)
		return b, false
	}
	o := beginObj(b)
	o.time("ts", ts)
	if node, ok := attrStr(res, sc.HostName); ok {
		o.str("node", node)
	}
	if svc, ok := attrStr(res, sc.ServiceName); ok {
		o.str("service", svc)
	}
	if pid, ok := attrInt(res, sc.ProcessPID); ok {
		o.int("pid", pid)
	}
	// The names the sender redacted, then the ones redacted here, each once.
	var redacted []string
	seen := map[string]bool{}
	for _, v := range attrSlice(bm, "redacted").All() {
		if n := v.AsString(); !seen[n] && len(redacted) < sc.RunConfigMaxArgs && len(n) <= sc.RunConfigMaxKeyBytes {
			seen[n] = true
			redacted = append(redacted, n)
		}
	}
	o.key("args")
	o.b = append(o.b, '{')
	first := true
	for k, v := range args.All() {
		if !first {
			o.b = append(o.b, ',')
		}
		first = false
		o.b = appendString(o.b, k)
		o.b = append(o.b, ':')
		if sc.SecretArg(k) && !unsetValue(v) {
			o.b = appendString(o.b, sc.RunConfigRedacted)
			if !seen[k] {
				seen[k] = true
				redacted = append(redacted, k)
			}
			continue
		}
		o.b = appendArgValue(o.b, v)
	}
	o.b = append(o.b, '}')
	if len(redacted) > 0 {
		o.key("redacted")
		o.b = appendStrings(o.b, redacted)
	}
	if tr := attrSlice(bm, "truncated"); tr.Len() > 0 && tr.Len() <= sc.RunConfigMaxArgs {
		names := make([]string, 0, tr.Len())
		for _, v := range tr.All() {
			if n := v.AsString(); len(n) <= sc.RunConfigMaxKeyBytes {
				names = append(names, n)
			}
		}
		o.key("truncated")
		o.b = appendStrings(o.b, names)
	}
	if d, ok := attrInt(bm, "dropped"); ok && d > 0 {
		o.int("dropped", d)
	}
	return o.line(), true
}

// checkRunConfig checks every argument against the ingest limits before the record is written whole.
func checkRunConfig(args pcommon.Map) string {
	if args.Len() > sc.RunConfigMaxArgs {
		return "run_config lists " + strconv.Itoa(args.Len()) + " arguments (limit " + strconv.Itoa(sc.RunConfigMaxArgs) + ")"
	}
	for k, v := range args.All() {
		if len(k) > sc.RunConfigMaxKeyBytes {
			return "run_config argument name over " + strconv.Itoa(sc.RunConfigMaxKeyBytes) + " bytes"
		}
		switch v.Type() {
		case pcommon.ValueTypeMap:
			return "run_config argument " + strconv.Quote(k) + " is a map (arguments are flat)"
		case pcommon.ValueTypeStr:
			if len(v.Str()) > sc.RunConfigMaxString {
				return "run_config string over " + strconv.Itoa(sc.RunConfigMaxString) + " bytes"
			}
		case pcommon.ValueTypeBytes:
			if v.Bytes().Len() > sc.RunConfigMaxString {
				return "run_config string over " + strconv.Itoa(sc.RunConfigMaxString) + " bytes"
			}
		case pcommon.ValueTypeSlice:
			s := v.Slice()
			if s.Len() > sc.RunConfigMaxList {
				return "run_config array over " + strconv.Itoa(sc.RunConfigMaxList) + " items"
			}
			for _, x := range s.All() {
				switch x.Type() {
				case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
					return "run_config array of arrays or maps"
				case pcommon.ValueTypeStr:
					if len(x.Str()) > sc.RunConfigMaxString {
						return "run_config string over " + strconv.Itoa(sc.RunConfigMaxString) + " bytes"
					}
				}
			}
		}
	}
	return ""
}

// unsetValue is a secret's value that says only that it is unset: empty (None), "" or false.
func unsetValue(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return true
	case pcommon.ValueTypeStr:
		return v.Str() == ""
	case pcommon.ValueTypeBool:
		return !v.Bool()
	}
	return false
}

// appendArgValue writes an argument's value (checkRunConfig passed it: a scalar or an array of scalars) with the
// user information of URLs in strings redacted.
func appendArgValue(b []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendString(b, sc.RedactURLUserinfo(v.Str()))
	case pcommon.ValueTypeSlice:
		b = append(b, '[')
		for i, x := range v.Slice().All() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendArgValue(b, x)
		}
		return append(b, ']')
	}
	return appendValue(b, v, 0)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}
