package jsonlexporter

import (
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Bundles: the trajectories and engine_traces streams write all spans of one trace that end in the same hour and
// arrive in the same export as one record (docs/semconv.md §8.3, §10.2). One bundler serves both; M is what a
// stream keeps of each span (member for trajectories, engineSpan for engine spans).

// maxBundle caps the spans of one record, so a pathological trace (thousands of spans) still makes lines of
// bounded size; its spans then continue in a further record.
const maxBundle = 256

type bundleKey struct {
	trace pcommon.TraceID
	hour  int64
}

type bundle struct {
	end      pcommon.Timestamp // an end time of a member: picks the partition
	first, n int
}

// bundler groups the spans of one export by (trace, end hour), keeping arrival order within a bundle. It is
// pooled (one pool per M): a batch of a few hundred spans then costs no allocation.
type bundler[M any] struct {
	index   map[bundleKey]int
	bundles []bundle
	arrived []M
	spans   []ptrace.Span // span of arrived[i]: its trace and end time pick the bundle
	of      []int         // bundle of arrived[i]
	members []M           // arrived, grouped by bundle (bundle.first indexes it)
}

func newBundlerPool[M any]() *sync.Pool {
	return &sync.Pool{New: func() any { return &bundler[M]{index: map[bundleKey]int{}} }}
}

func (g *bundler[M]) release(pool *sync.Pool) {
	if len(g.arrived) > 4096 {
		return // an unusually large export: let the GC have it
	}
	clear(g.index)
	g.bundles, g.arrived, g.spans, g.of, g.members = g.bundles[:0], g.arrived[:0], g.spans[:0], g.of[:0], g.members[:0]
	pool.Put(g)
}

// add queues m, kept for span, and returns it for the caller to fill in place (valid until the next add).
func (g *bundler[M]) add(span ptrace.Span, m M) *M {
	g.arrived = append(g.arrived, m)
	g.spans = append(g.spans, span)
	return &g.arrived[len(g.arrived)-1]
}

// write groups the queued spans into bundles and encodes each as one line of stream into r, straight into the
// partition's chunk: no scratch copy on the hottest path.
func (g *bundler[M]) write(r *records, stream string, encode func(b []byte, ms []M) []byte) {
	g.group()
	for i := range g.bundles {
		bd := &g.bundles[i]
		c := r.chunkFor(stream, bd.end)
		before := len(c.data)
		c.data = encode(c.data, g.members[bd.first:bd.first+bd.n])
		if n := len(c.data) - before; n > runfiles.MaxLine {
			c.data = c.data[:before] // a line no reader reads: dropped and counted, not written
			r.overLimit(int64(bd.n), lineTooLong(stream, n))
			continue
		}
		c.lines++
	}
}

// group assigns each span its bundle in arrival order (a trace's spans past maxBundle start a further one) and
// lays the members out bundle by bundle (a counting sort: stable, linear).
func (g *bundler[M]) group() {
	for _, span := range g.spans {
		k := bundleKey{trace: span.TraceID(), hour: hourOf(span.EndTimestamp())}
		i, ok := g.index[k]
		if !ok || g.bundles[i].n >= maxBundle {
			i = len(g.bundles)
			g.index[k] = i
			g.bundles = append(g.bundles, bundle{end: span.EndTimestamp()})
		}
		g.bundles[i].n++
		g.of = append(g.of, i)
	}
	var off int
	for i := range g.bundles {
		g.bundles[i].first = off
		off += g.bundles[i].n
		g.bundles[i].n = 0
	}
	g.members = slices.Grow(g.members[:0], len(g.arrived))[:len(g.arrived)] // every slot is written below
	for j, b := range g.of {
		bd := &g.bundles[b]
		g.members[bd.first+bd.n] = g.arrived[j]
		bd.n++
	}
}
