package store

import (
	"fmt"
	"testing"
)

// TestFollowAdoptsEarlierStart: a dashboard following a run from before its first record takes the collector's
// start (meta.json start_ts) as the run's start; when records timed before it arrive (a run that restarted its
// clock, a replay of an earlier run) the run's start moves to the first record, as a fresh open would say,
// without restarting the dashboard.
func TestFollowAdoptsEarlierStart(t *testing.T) {
	dir := t.TempDir()
	collectorStart := h0 + 2*3600
	write(t, dir, "dashboard/meta.json", fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":%v,"starts":[%v]}`, collectorStart, collectorStart))
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]},"n1:1":{"ranks":[1],"roles":["train"]}}}`)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.Meta().StartTS; got != collectorStart {
		t.Fatalf("before any record: start %v, want the collector's %v", got, collectorStart)
	}
	write(t, dir, "dashboard/phases/"+hourA+".jsonl", rec("actor_train", 10, 70, 0, "a1", "")+rec("actor_train", 80, 90, 1, "b1", ""))
	st.Refresh()
	if got := st.Meta().StartTS; got != h0+10 {
		t.Fatalf("after records timed before the collector's start: start %v, want the first record's %v", got, h0+10)
	}
	fresh, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if a, b := st.Meta().TimeRange, fresh.Meta().TimeRange; a != b {
		t.Errorf("followed time range %v, a fresh open's %v", a, b)
	}
}

// TestFirstReadsAreNoArrival: a follower reading an hour that was there already (the newest hours, read ahead of
// the rollover once any is held) finds no new data: the answers kept until data arrives (the step explanations'
// memo, answers.go) stay. Records appended to a held hour, and a new hour, are arrivals.
func TestFirstReadsAreNoArrival(t *testing.T) {
	dir := budgetRun(t, 4)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st.Refresh()
	if _, err := st.Anatomy(0, "submit", 0, 10); err != nil { // holds hour 0 of trajectories, engine traces, gpu
		t.Fatal(err)
	}
	v := st.answerVersion()
	st.Refresh() // reads the newest hours for the first time
	st.Refresh()
	if got := st.answerVersion(); got != v {
		t.Fatalf("reading hours that were there already counted as %d arrivals", got-v)
	}
	h := int64(budgetH0 / 3600)
	w := &trajW{n: 9000}
	w.span("queue", budgetH0+100, budgetH0+101, 4242, `,"sample":77,"group":77,"attempt":0`)
	appendTo(t, dir, "dashboard/trajectories/"+hourName(h)+".jsonl", w.b.String())
	st.Refresh()
	if st.answerVersion() == v {
		t.Fatal("a record appended to a held hour is no arrival")
	}
	v = st.answerVersion()
	writeBudgetHour(t, dir, 4)
	st.Refresh()
	if st.answerVersion() == v {
		t.Fatal("a new hour is no arrival")
	}
}
