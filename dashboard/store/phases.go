package store

import (
	"encoding/json"
	"math"
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
	var r phaseRec
	r.Rank = -1
	if err := json.Unmarshal(line, &r); err != nil || r.Name == "" || r.T0 <= 0 {
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
