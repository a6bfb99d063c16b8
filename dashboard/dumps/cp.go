package dumps

// Context-parallel layout of per-token train fields, as miles writes its train shards: the sequence is
// cut into 2·cp zigzag chunks of cs = ceil(L / (2·cp)) tokens (L = total_length for thd, max_seq_len for bshd);
// rank r owns chunks r and 2·cp−r−1. A response field value i belongs to logit position P−1+i; a rank stores,
// chunk after chunk, the values whose logit positions fall in its chunks.

// cpPiece is one contiguous run of a rank's stored slice: response indexes [Lo, Hi) at slice offset Off.
type cpPiece struct {
	Rank   int
	Lo, Hi int
	Off    int
}

// cpLayout returns, per rank, the pieces of its slice in stored order, and each rank's slice width.
func cpLayout(total, resp, cp, seqLen int) ([][]cpPiece, []int) {
	if seqLen <= 0 {
		seqLen = total
	}
	cs := (seqLen + 2*cp - 1) / (2 * cp)
	p1 := total - resp - 1 // P − 1
	pieces := make([][]cpPiece, cp)
	widths := make([]int, cp)
	for r := range cp {
		off := 0
		for _, c := range [2][2]int{{r * cs, (r + 1) * cs}, {(2*cp - r - 1) * cs, (2*cp - r) * cs}} {
			s, e := max(c[0], p1), min(c[1], total-1)
			if s >= e {
				continue
			}
			pieces[r] = append(pieces[r], cpPiece{Rank: r, Lo: s - p1, Hi: e - p1, Off: off})
			off += e - s
		}
		widths[r] = off
	}
	return pieces, widths
}

// cpCovers reports whether the pieces tile [0, resp) exactly once.
func cpCovers(pieces [][]cpPiece, resp int) bool {
	seen := make([]bool, resp)
	n := 0
	for _, ps := range pieces {
		for _, p := range ps {
			if p.Lo < 0 || p.Hi > resp {
				return false
			}
			for i := p.Lo; i < p.Hi; i++ {
				if seen[i] {
					return false
				}
				seen[i] = true
				n++
			}
		}
	}
	return n == resp
}

// reassemble puts full response values back together from every rank's slice (all ranks must be present).
// It returns false when a slice's width does not match the layout: the field cannot be aligned.
func reassemble(slices [][]float32, total, resp, seqLen int) ([]float32, bool) {
	cp := len(slices)
	pieces, widths := cpLayout(total, resp, cp, seqLen)
	out := make([]float32, resp)
	for r := range cp {
		if slices[r] == nil && widths[r] != 0 || len(slices[r]) != widths[r] {
			return nil, false
		}
		for _, p := range pieces[r] {
			copy(out[p.Lo:p.Hi], slices[r][p.Off:p.Off+p.Hi-p.Lo])
		}
	}
	if !cpCovers(pieces, resp) {
		return nil, false
	}
	return out, true
}
