package store

import (
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// MinMax is a decimated field: per bucket min and max, NaN where there was no sample (null in JSON).
type MinMax struct {
	Min Floats `json:"min"`
	Max Floats `json:"max"`
}

// GPUResult is the gpu endpoint's data.
type GPUResult struct {
	// T0 and T1 are the window.
	T0 float64 `json:"t0"`
	T1 float64 `json:"t1"`
	// Step is the bucket width in seconds.
	Step float64 `json:"step_s"`
	// T are the buckets' start times.
	T []float64 `json:"t"`
	// Lanes are the selected lanes' fields, in selection order.
	Lanes []GPULane `json:"lanes"`
}

// GPULane is one lane's decimated fields. In JSON it is one object: "id" and the fields by name, in name order.
type GPULane struct {
	// ID is the lane's id.
	ID string
	// Fields are the requested fields by name.
	Fields map[string]*MinMax
}

// MarshalJSON writes {"id": …, field: {"min": …, "max": …}, …} with the keys sorted (a field named "id"
// replaces the id, as it did when a lane was a map), the columns written straight into one buffer.
func (l GPULane) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(l.Fields)+1)
	size := 16 + len(l.ID)
	for k, mm := range l.Fields {
		keys = append(keys, k)
		size += len(k) + 24 + 6*(len(mm.Min)+len(mm.Max))
	}
	if l.Fields["id"] == nil {
		keys = append(keys, "id")
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSONString(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		mm := l.Fields[k]
		if mm == nil {
			if b, err = appendJSONString(b, l.ID); err != nil {
				return nil, err
			}
			continue
		}
		b = append(b, `{"min":`...)
		b = mm.Min.appendJSON(b)
		b = append(b, `,"max":`...)
		b = mm.Max.appendJSON(b)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as encoding/json writes it.
func appendJSONString(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}

// GPU returns min/max decimated series of the requested fields on the selected lanes.
func (s *Store) GPU(t0, t1 float64, sel []*Lane, points int, fields []string) *GPUResult {
	return s.gpuQuery(t0, t1, sel, points, fields, false, false)
}

// gpuQuery answers GPU; coarse (the fleet overview) lets the roll-up answer at any bucket width (gpu_rollup.go);
// maxOnly (the carpet, the fleet) asks for the maxima alone: Min is then left empty, and the 4 s maxima may
// answer. Buckets are those of newCellGrid (gpu_grid.go): T0, T1 and T say where their edges are.
func (s *Store) gpuQuery(t0, t1 float64, sel []*Lane, points int, fields []string, coarse, maxOnly bool) *GPUResult {
	g := newCellGrid(t0, t1, points)
	lo, hi := math.Min(t0, g.edge(0)), math.Max(t1, g.edge(points))
	defer s.pin()()
	s.gpu.ensure(lo, hi, g.width, coarse, fields, sel)
	s.mu.RLock()
	defer s.mu.RUnlock()
	res := &GPUResult{T0: g.edge(0), T1: g.edge(points), Step: g.width, T: g.starts()}
	hours := s.gpu.hours(lo, hi)
	rolls := make([]*rollBlock, len(hours))
	for i, h := range hours {
		if rolls[i] = s.gpu.rollUse(h, t0, g.width, coarse); rolls[i] != nil && !eagerOnly(fields) {
			rolls[i].readBody() // a cached hour's fields not eager, before the workers read them
		}
	}
	res.Lanes = make([]GPULane, len(sel))
	// Lanes are independent: folded on every core when many (a carpet of 512 lanes reads ~7 M readings), each
	// worker decoding into its own reused buffers.
	workers := foldWorkers(len(sel))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var sc foldScratch
			for {
				li := int(next.Add(1) - 1)
				if li >= len(sel) {
					return
				}
				res.Lanes[li] = s.gpu.foldLane(sel[li], hours, rolls, g, fields, maxOnly, &sc)
			}
		})
	}
	wg.Wait()
	return res
}

// foldWorkers is how many goroutines fold lanes lanes: every core when many.
func foldWorkers(lanes int) int {
	if lanes >= 16 {
		return runtime.GOMAXPROCS(0)
	}
	return 1
}

// foldLane is one lane's answer of gpuQuery: per hour the roll-up's part, then the raw readings after it.
func (g *gpuReader) foldLane(l *Lane, hours []int64, rolls []*rollBlock, grid cellGrid, fields []string, maxOnly bool, sc *foldScratch) GPULane {
	lane := GPULane{ID: l.ID, Fields: make(map[string]*MinMax, len(fields))}
	mms := make([]*MinMax, len(fields))
	for i, f := range fields {
		mms[i] = &MinMax{Max: nanSlice(grid.n)}
		if !maxOnly {
			mms[i].Min = nanSlice(grid.n)
		}
		lane.Fields[f] = mms[i]
	}
	// maxOnly: the roll-up's minima go to scratch, never read (widening a bucket's max does not look at its min).
	omin := func(i int) []float64 { return mms[i].Min }
	if maxOnly {
		if cap(sc.mins) < grid.n {
			sc.mins = make([]float64, grid.n)
		}
		omin = func(int) []float64 { return sc.mins[:grid.n] }
	}
	for hi, h := range hours {
		rb := rolls[hi]
		ld, mu := g.rawLane(l, h, rb)
		for i, f := range fields {
			from := math.Inf(-1) // raw data from here on: after the roll-up's newest bucket
			if rb != nil && rb.fields[f] {
				if rf := rb.lanes[l.Key][f]; rf != nil {
					rf.fold(float64(h*3600), float64(rb.step), grid, rb.end, omin(i), mms[i].Max)
				}
				from = rb.end
			}
			if ld != nil {
				ld.minMaxBuckets(f, h, grid, from, mms[i].Min, mms[i].Max, sc, mu)
			}
		}
	}
	return lane
}

// rawLane is lane l's raw readings of hour h that a query reads beside roll-up block rb (nil: none), and the
// mutex guarding their pre-aggregates.
func (g *gpuReader) rawLane(l *Lane, h int64, rb *rollBlock) (*laneData, *sync.Mutex) {
	if b := g.blocks[h]; b != nil {
		return b.lanes[l.Key], &b.pyrMu
	}
	if tb := g.tails[h]; tb != nil && rb != nil && tb.from <= rb.end {
		return tb.b.lanes[l.Key], &tb.b.pyrMu // the live tail after the roll-up
	}
	return nil, nil
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Floats marshals NaN as null (JSON has no NaN): a gap in a series.
type Floats []float64

func (f Floats) MarshalJSON() ([]byte, error) {
	return f.appendJSON(make([]byte, 0, 2+len(f)*6)), nil
}

// appendJSON appends f as a JSON array, NaN and ±Inf as null.
func (f Floats) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
		}
	}
	return append(b, ']')
}
