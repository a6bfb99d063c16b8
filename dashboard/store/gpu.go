package store

import (
	"math"
)

// pyramidStep is the finest pre-aggregated bucket (seconds). A 1-hour block keeps 3600/16 = 225 min/max pairs per
// lane and field, so zoomed-out views never decode raw samples; coarser power-of-two levels are folded from it
// at query time.
const pyramidStep = 16

const bucketsPerHour = 3600 / pyramidStep

// series is one lane's field in one hour: compressed samples plus a min/max pyramid.
type series struct {
	col      column
	min, max []float32 // bucketsPerHour, NaN = empty
}

func newSeries() *series {
	s := &series{min: make([]float32, bucketsPerHour), max: make([]float32, bucketsPerHour)}
	nan := float32(math.NaN())
	for i := range s.min {
		s.min[i], s.max[i] = nan, nan
	}
	return s
}

func (s *series) add(hourStartMs, tMs int64, v float64) {
	s.col.append(tMs, v)
	b := (tMs - hourStartMs) / (pyramidStep * 1000)
	if b < 0 || b >= bucketsPerHour {
		return // a sample filed under the wrong hour (legacy flat files): raw only
	}
	f := float32(v)
	if cur := s.min[b]; cur != cur || f < cur {
		s.min[b] = f
	}
	if cur := s.max[b]; cur != cur || f > cur {
		s.max[b] = f
	}
}

// gpuBlock holds one hour of gpu_util: lane key → field → series.
type gpuBlock struct {
	hour   int64
	lanes  map[string]map[string]*series
	fields map[string]bool
	minTs  float64
	maxTs  float64
	values int
}

func newGPUBlock(hour int64) *gpuBlock {
	return &gpuBlock{hour: hour, lanes: map[string]map[string]*series{}, fields: map[string]bool{}, minTs: math.Inf(1), maxTs: math.Inf(-1)}
}

// addLine parses one gpu_util record (ours or miles v1: same core fields) into the block.
func (b *gpuBlock) addLine(line []byte, onLane func(key string)) bool {
	var ts float64
	var node []byte
	gpu := -1.0
	type kv struct {
		k string
		v float64
	}
	var vals [24]kv
	n := 0
	ok := true
	err := scanFlat(line, func(key, val []byte, str bool) {
		switch string(key) {
		case "ts":
			var good bool
			if ts, good = parseNum(val); !good {
				ok = false
			}
		case "node":
			node = val
		case "gpu":
			var good bool
			if gpu, good = parseNum(val); !good {
				ok = false
			}
		case "uuid":
		default:
			if str || n >= len(vals) {
				return
			}
			if v, good := parseNum(val); good {
				vals[n] = kv{string(key), v}
				n++
			}
		}
	})
	if err != nil || !ok || node == nil || gpu < 0 || ts <= 0 {
		return false
	}
	key := string(node) + ":" + itoa(int(gpu))
	lane := b.lanes[key]
	if lane == nil {
		lane = map[string]*series{}
		b.lanes[key] = lane
		if onLane != nil {
			onLane(key)
		}
	}
	tMs := int64(math.Round(ts * 1000))
	h0 := b.hour * 3600 * 1000
	if b.hour < 0 {
		h0 = (tMs / 3600000) * 3600000
	}
	for _, x := range vals[:n] {
		s := lane[x.k]
		if s == nil {
			s = newSeries()
			lane[x.k] = s
			b.fields[x.k] = true
		}
		s.add(h0, tMs, x.v)
		b.values++
	}
	b.minTs = math.Min(b.minTs, ts)
	b.maxTs = math.Max(b.maxTs, ts)
	return true
}

func itoa(i int) string {
	if i >= 0 && i < 10 {
		return string(rune('0' + i))
	}
	var b [20]byte
	p := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}

func (b *gpuBlock) memBytes() int {
	n := 0
	for _, fields := range b.lanes {
		for _, s := range fields {
			n += s.col.bytes() + 8*len(s.min)
		}
	}
	return n
}

// minMaxBuckets folds one series into out (len = buckets over [t0, t1)), from the pyramid for wide buckets and
// from the raw samples otherwise.
func (s *series) minMaxBuckets(hour int64, t0, t1 float64, omin, omax []float64) {
	nb := len(omin)
	width := (t1 - t0) / float64(nb)
	put := func(t float64, lo, hi float64) {
		i := int((t - t0) / width)
		if i < 0 || i >= nb {
			return
		}
		if math.IsNaN(omin[i]) || lo < omin[i] {
			omin[i] = lo
		}
		if math.IsNaN(omax[i]) || hi > omax[i] {
			omax[i] = hi
		}
	}
	// The pyramid places a 16 s bucket by its midpoint, so it is used only when output buckets are at least
	// 4× wider (misplacement under 1/8 of a bucket); finer views decode the raw samples.
	if width >= 4*pyramidStep && hour >= 0 {
		h0 := float64(hour * 3600)
		for j := 0; j < bucketsPerHour; j++ {
			if s.min[j] != s.min[j] {
				continue
			}
			bt := h0 + float64(j*pyramidStep)
			if bt+pyramidStep <= t0 || bt >= t1 {
				continue
			}
			put(math.Min(math.Max(bt+pyramidStep/2, t0), math.Nextafter(t1, t0)), float64(s.min[j]), float64(s.max[j]))
		}
		return
	}
	// A GPU reading covers the period before it (NVML: "percent of time over the past sample period"), so a
	// sample fills every bucket back to the previous sample when buckets are finer than the sampling interval
	// — unless the gap is over 3 typical intervals: then it is a real gap (collector down) and stays empty.
	lo, hi := int64(t0*1000), int64(t1*1000)
	maxGap := int64(3 * s.col.interval())
	prev := int64(math.MinInt64)
	s.col.each(func(tMs int64, v float64) bool {
		if tMs >= lo && prev < hi && tMs-prev <= maxGap && prev >= 0 {
			from := max(prev+1, lo)
			to := min(tMs, hi-1)
			b0 := int((float64(from)/1000 - t0) / width)
			b1 := int((float64(to)/1000 - t0) / width)
			for b := max(b0, 0); b <= b1 && b < nb; b++ {
				put(t0+(float64(b)+0.5)*width, v, v)
			}
		} else if tMs >= lo && tMs < hi {
			put(float64(tMs)/1000, v, v)
		}
		prev = tMs
		return tMs < hi+maxGap
	})
}
