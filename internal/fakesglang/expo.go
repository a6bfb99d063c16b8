package fakesglang

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// Kind is a Prometheus metric family type.
type Kind int

// Family kinds as written on the `# TYPE` line.
const (
	Gauge Kind = iota
	Counter
	Histogram
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Histogram:
		return "histogram"
	default:
		return "gauge"
	}
}

// Label is one name/value pair of a sample.
type Label struct{ Name, Value string }

// Sample is one series of a family: a value (gauge, counter) or a cumulative histogram.
type Sample struct {
	Labels []Label
	Value  float64
	// Histogram only: per-bucket cumulative counts for Family.Bounds (len(Bounds)), then Count and Sum.
	Buckets []float64
	Count   float64
	Sum     float64
}

// Family is a metric family as sglang's prometheus_client registry exposes it.
type Family struct {
	Name    string // e.g. "sglang:num_running_reqs", "sglang:prompt_tokens_total"
	Help    string
	Kind    Kind
	Bounds  []float64 // histogram upper bounds, without +Inf
	Samples []Sample
}

// WriteText renders families in the Prometheus text exposition format (version 0.0.4), the way Python's
// prometheus_client generate_latest writes them: HELP, TYPE, samples; histograms as _bucket (with le, ending
// in +Inf), _count, _sum; values formatted like floatToGoString.
// extra labels are added to every sample (the router's worker_addr); underscore replaces ':' in names when set.
func WriteText(b *strings.Builder, fams []Family, extra []Label, underscore bool) {
	for i := range fams {
		writeFamily(b, &fams[i], extra, underscore, true)
	}
}

func writeFamily(b *strings.Builder, f *Family, extra []Label, underscore, header bool) {
	name := f.Name
	if underscore {
		name = strings.ReplaceAll(name, ":", "_")
	}
	if header {
		b.WriteString("# HELP ")
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(escapeHelp(f.Help))
		b.WriteString("\n# TYPE ")
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(f.Kind.String())
		b.WriteByte('\n')
	}
	for si := range f.Samples {
		s := &f.Samples[si]
		labels := mergeLabels(s.Labels, extra)
		if f.Kind != Histogram {
			writeSample(b, name, labels, nil, s.Value)
			continue
		}
		for bi, ub := range f.Bounds {
			le := Label{"le", pyFloat(ub)}
			writeSample(b, name+"_bucket", labels, &le, s.Buckets[bi])
		}
		inf := Label{"le", "+Inf"}
		writeSample(b, name+"_bucket", labels, &inf, s.Count)
		writeSample(b, name+"_count", labels, nil, s.Count)
		writeSample(b, name+"_sum", labels, nil, s.Sum)
	}
}

func mergeLabels(ls, extra []Label) []Label {
	if len(extra) == 0 {
		return ls
	}
	out := make([]Label, 0, len(ls)+len(extra))
	out = append(out, ls...)
	out = append(out, extra...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func writeSample(b *strings.Builder, name string, labels []Label, le *Label, v float64) {
	b.WriteString(name)
	if len(labels) > 0 || le != nil {
		b.WriteByte('{')
		n := 0
		write := func(l Label) {
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString(l.Name)
			b.WriteString(`="`)
			b.WriteString(escapeLabel(l.Value))
			b.WriteByte('"')
		}
		// prometheus_client's multiprocess collector appends le after the metric's own labels.
		for _, l := range labels {
			write(l)
		}
		if le != nil {
			write(*le)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(pyFloat(v))
	b.WriteByte('\n')
}

func escapeHelp(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return strings.ReplaceAll(s, "\n", `\n`)
}

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return strings.ReplaceAll(s, "\n", `\n`)
}

// pyFloat formats v as prometheus_client's floatToGoString does: Python's repr of the float, switched to an
// exponent form for large positive numbers the way Go prints them ("8.128902e+06", "24.0", "0.73", "+Inf").
func pyFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	s := pyRepr(v)
	dot := strings.IndexByte(s, '.')
	if v > 0 && dot > 6 {
		mant := strings.TrimRight(s[:1]+"."+s[1:dot]+s[dot+1:], "0.")
		return mant + "e+0" + strconv.Itoa(dot-1)
	}
	return s
}

// pyRepr is Python's repr(float): the shortest round-trip digits, fixed notation for exponents in [-4, 16),
// always with a fractional part ("24.0"), scientific otherwise ("1e-05", "1e+16").
func pyRepr(v float64) string {
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(v, 'e', -1, 64) // e.g. "-1.2345e+06"
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	ei := strings.IndexByte(e, 'e')
	mant, exp := e[:ei], e[ei+1:]
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	switch {
	case x < -4 || x >= 16:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if x < 0 {
			sign = "-"
			x = -x
		}
		xs := strconv.Itoa(x)
		if len(xs) < 2 {
			xs = "0" + xs
		}
		out = m + "e" + sign + xs
	case x < 0:
		out = "0." + strings.Repeat("0", -x-1) + digits
	case len(digits) <= x+1:
		out = digits + strings.Repeat("0", x+1-len(digits)) + ".0"
	default:
		out = digits[:x+1] + "." + digits[x+1:]
	}
	if neg {
		out = "-" + out
	}
	return out
}
