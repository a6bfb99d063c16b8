package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sameIDsRun writes the phases of 4 train ranks on node n1 (one GPU each) whose emitters drew identical span
// ids (Python RNGs seeded alike on every TP/DP/CP rank): 30 closed phases per rank in hour 0, each with its open
// marker; then a 31st phase, which ranks 0–2 close and rank 3 does not (stalled open since hour 0, with the
// span id of the other ranks' closed ones). Hour 1 holds readings only, so a window there reads hour 0 sparse (its reach hour).
func sameIDsRun(t *testing.T) string {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]},"n1:1":{"ranks":[1],"roles":["train"]},"n1:2":{"ranks":[2],"roles":["train"]},"n1:3":{"ranks":[3],"roles":["train"]}}}`)
	var b strings.Builder
	rec := func(rank int, i uint64, t0 float64, t1 string) {
		fmt.Fprintf(&b, `{"name":"actor_train","t0":%.6f,"t1":%s,"node":"n1","rank":%d,"role":"train","gpus":[%d],"step":%d,"span":"%016x"}`+"\n",
			t0, t1, rank, rank, i, (i+1)*0x9e3779b97f4a7c15)
	}
	for i := range uint64(30) {
		for rank := range 4 {
			t0 := h0 + 10 + float64(i)*60
			rec(rank, i, t0, "null")
			rec(rank, i, t0, fmt.Sprintf("%.6f", t0+30))
		}
	}
	for rank := range 4 {
		rec(rank, 30, h0+1900, "null")
		if rank < 3 {
			rec(rank, 30, h0+1900, fmt.Sprintf("%.6f", h0+1930))
		}
	}
	hour := func(k int) string { return time.Unix(int64(h0)+int64(k)*3600, 0).UTC().Format("20060102_15") }
	write(t, dir, "dashboard/phases/"+hour(0)+".jsonl", b.String())
	write(t, dir, "dashboard/gpu_util/"+hour(0)+".jsonl", gpuLine(h0+1, "n1", 0, 50))
	write(t, dir, "dashboard/gpu_util/"+hour(1)+".jsonl", gpuLine(h0+3600+1200, "n1", 0, 50))
	return dir
}

// TestPhasesSameSpanIDsAcrossRanks: ranks that send identical span ids each keep all their phases, and an open
// marker is closed only by a closed record of its own rank (docs/semconv.md §8.3, record identity of phases).
func TestPhasesSameSpanIDsAcrossRanks(t *testing.T) {
	st, err := Open(sameIDsRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	count := func(p *PhasesResult) (closed, open map[string]int) {
		closed, open = map[string]int{}, map[string]int{}
		for _, l := range p.Lanes {
			for i := range l.T0 {
				if l.Open[i] {
					open[l.ID]++
				} else {
					closed[l.ID]++
				}
			}
		}
		return closed, open
	}
	// Hour 1 first: hour 0 is then a reach hour, read sparse.
	_, open := count(st.Phases(h0+3600+100, h0+3600+1000, lanes))
	if got := fmt.Sprint(open); got != "map[g3:1]" {
		t.Errorf("hour 1 (hour 0 read sparse): open phases per lane %s, want map[g3:1] (rank 3's stalled phase)", got)
	}
	closed, open := count(st.Phases(h0, h0+3600, lanes))
	if got := fmt.Sprint(closed); got != "map[g0:31 g1:31 g2:31 g3:30]" {
		t.Errorf("hour 0: closed phases per lane %s, want 31, 31, 31 and 30 (g3: one open)", got)
	}
	if got := fmt.Sprint(open); got != "map[g3:1]" {
		t.Errorf("hour 0: open phases per lane %s, want map[g3:1]", got)
	}
	perRank := map[int]int{}
	openRank := map[int]int{}
	recs, _ := st.AllPhases()
	for _, r := range recs {
		if r.Open {
			openRank[r.Rank]++
		} else {
			perRank[r.Rank]++
		}
	}
	if fmt.Sprint(perRank) != "map[0:31 1:31 2:31 3:30]" || fmt.Sprint(openRank) != "map[3:1]" {
		t.Errorf("AllPhases: closed per rank %v, open per rank %v; want 31, 31, 31, 30 and rank 3's one open", perRank, openRank)
	}
}

// TestPhasesSameSpanIDsAcrossProcesses: two processes without a rank on one node (the rollout manager and the
// driver, rank -1 both) that draw the same span id are told apart by their pid.
func TestPhasesSameSpanIDsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	hour := time.Unix(int64(h0), 0).UTC().Format("20060102_15")
	var b strings.Builder
	for _, pid := range []int{100, 200} {
		for _, t1 := range []string{"null", fmt.Sprintf("%.1f", h0+40)} {
			fmt.Fprintf(&b, `{"name":"rollout","t0":%.1f,"t1":%s,"node":"n1","rank":-1,"role":"rollout_manager","gpus":[],"step":1,"span":"00000000000000aa","pid":%d}`+"\n", h0+20, t1, pid)
		}
	}
	fmt.Fprintf(&b, `{"name":"rollout","t0":%.1f,"t1":null,"node":"n1","rank":-1,"role":"rollout_manager","gpus":[],"step":2,"span":"00000000000000bb","pid":300}`+"\n", h0+50)
	fmt.Fprintf(&b, `{"name":"rollout","t0":%.1f,"t1":%.1f,"node":"n1","rank":-1,"role":"rollout_manager","gpus":[],"step":2,"span":"00000000000000bb","pid":100}`+"\n", h0+50, h0+60)
	write(t, dir, "dashboard/phases/"+hour+".jsonl", b.String())
	write(t, dir, "dashboard/gpu_util/"+hour+".jsonl", gpuLine(h0+100, "n1", 0, 50))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := st.AllPhases()
	var closed, open int
	for _, r := range recs {
		if r.Open {
			open++
		} else {
			closed++
		}
	}
	if closed != 3 || open != 1 {
		t.Fatalf("%d closed and %d open phases, want 3 closed (pids 100, 200; 100's second) and pid 300's open one", closed, open)
	}
}
