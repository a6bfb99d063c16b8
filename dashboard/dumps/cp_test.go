package dumps

import "testing"

// TestCPLayoutTiles: for every shape, the ranks' pieces tile the response exactly once, widths add up to R, and
// cutting then reassembling gives the values back (the layout described in cp.go).
func TestCPLayoutTiles(t *testing.T) {
	for _, cp := range []int{1, 2, 3, 4, 8} {
		for T := 2; T <= 70; T += 3 {
			for R := 1; R < T; R += 2 {
				for _, L := range []int{T, T + 7} { // thd, bshd (max_seq_len ≥ T)
					pieces, widths := cpLayout(T, R, cp, L)
					if !cpCovers(pieces, R) {
						t.Fatalf("T=%d R=%d cp=%d L=%d: pieces %v do not tile the response", T, R, cp, L, pieces)
					}
					full := make([]float32, R)
					for i := range full {
						full[i] = float32(i) + 0.5
					}
					slices := make([][]float32, cp)
					sum := 0
					for r := range slices {
						for _, p := range pieces[r] {
							slices[r] = append(slices[r], full[p.Lo:p.Hi]...)
						}
						sum += widths[r]
					}
					got, ok := reassemble(slices, T, R, L)
					if !ok || sum != R {
						t.Fatalf("T=%d R=%d cp=%d: reassemble failed (widths %v)", T, R, cp, widths)
					}
					for i := range full {
						if got[i] != full[i] {
							t.Fatalf("T=%d R=%d cp=%d: value %d", T, R, cp, i)
						}
					}
					if cp > 1 && R > 1 {
						bad := append([][]float32(nil), slices...)
						bad[0] = append(bad[0], 1)
						if _, ok := reassemble(bad, T, R, L); ok {
							t.Fatalf("a slice of the wrong width must not align")
						}
					}
				}
			}
		}
	}
	// the documented example: cp 2, T 10 → cs 3; rank 0 owns [0,3) and [9,12), rank 1 [3,6) and [6,9)
	pieces, widths := cpLayout(10, 6, 2, 10)
	if widths[0] != 0 || widths[1] != 6 || len(pieces[1]) != 2 || pieces[1][0].Lo != 0 || pieces[1][1].Lo != 3 {
		t.Fatalf("example: %v %v", pieces, widths)
	}
}
