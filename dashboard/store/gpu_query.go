package store

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
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
	return s.gpuQuery(t0, t1, sel, points, fields, false)
}

// gpuQuery answers GPU; coarse (the fleet overview) lets the roll-up answer at any bucket width (gpu_rollup.go).
func (s *Store) gpuQuery(t0, t1 float64, sel []*Lane, points int, fields []string, coarse bool) *GPUResult {
	width := (t1 - t0) / float64(points)
	s.gpu.ensure(t0, t1, width, coarse, fields, sel)
	s.mu.RLock()
	defer s.mu.RUnlock()
	res := &GPUResult{T0: t0, T1: t1, Step: width, T: make([]float64, points)}
	for i := range res.T {
		res.T[i] = t0 + float64(i)*res.Step
	}
	hours := s.gpu.hours(t0, t1)
	rolls := make([]*rollBlock, len(hours))
	for i, h := range hours {
		rolls[i] = s.gpu.rollUse(h, t0, width, coarse)
	}
	for _, l := range sel {
		lane := GPULane{ID: l.ID, Fields: make(map[string]*MinMax, len(fields))}
		mms := make([]*MinMax, len(fields))
		for i, f := range fields {
			mms[i] = &MinMax{Min: nanSlice(points), Max: nanSlice(points)}
			lane.Fields[f] = mms[i]
		}
		for hi, h := range hours {
			var ld *laneData
			var mu *sync.Mutex
			rb := rolls[hi]
			if b := s.gpu.blocks[h]; b != nil {
				ld, mu = b.lanes[l.Key], &b.pyrMu
			} else if tb := s.gpu.tails[h]; tb != nil && rb != nil && tb.from <= rb.end {
				ld, mu = tb.b.lanes[l.Key], &tb.b.pyrMu // the live tail after the roll-up
			}
			var ts []int64 // decoded at most once per lane and hour, shared by the fields
			for i, f := range fields {
				from := math.Inf(-1) // raw data from here on: after the roll-up's newest bucket
				if rb != nil && rb.fields[f] {
					if rf := rb.lanes[l.Key][f]; rf != nil {
						rf.fold(float64(h*3600), float64(rb.step), t0, t1, rb.end, mms[i].Min, mms[i].Max, width < 4*float64(rb.step))
					}
					from = rb.end
				}
				if ld != nil {
					ld.minMaxBuckets(f, h, t0, t1, from, mms[i].Min, mms[i].Max, &ts, mu)
				}
			}
		}
		res.Lanes = append(res.Lanes, lane)
	}
	return res
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
