package e2e

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestSameSpanIDsE2E: 4 train ranks on one node whose emitters drew identical trace and span ids (miles seeds
// Python's random alike on every TP/DP/CP rank) each send 30 phases, an open marker then the closed span, through
// the real collector: the dashboard shows 4 lanes with 30 closed phases each and nothing left open
// (docs/semconv.md §8.3, the identity of a phase).
func TestSameSpanIDsE2E(t *testing.T) {
	dir := t.TempDir()
	c := e2etest.StartCollector(t, dir, e2etest.Options{})
	now := time.Now().Add(-time.Hour)
	const ranks, phases = 4, 30
	for rank := range int64(ranks) {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		for _, res := range []pcommon.Map{rl.Resource().Attributes(), rs.Resource().Attributes()} {
			res.PutStr(sc.ServiceName, "miles-trainer")
			res.PutStr(sc.HostName, "n1")
			res.PutInt(sc.ProcessPID, 1000+rank)
		}
		lrs, spans := rl.ScopeLogs().AppendEmpty().LogRecords(), rs.ScopeSpans().AppendEmpty().Spans()
		for i := range phases {
			t0 := now.Add(time.Duration(i) * time.Minute)
			tid, sid := pcommon.TraceID{0xaa, uint8(i)}, pcommon.SpanID{0xbb, uint8(i)} // the same on every rank
			attrs := func(a pcommon.Map) {
				a.PutStr(sc.SpanType, sc.SpanTypePhase)
				a.PutStr(sc.PhaseName, "actor_train")
				a.PutStr(sc.Role, "train")
				a.PutInt(sc.Rank, rank)
				a.PutEmptySlice(sc.GPUIDs).AppendEmpty().SetInt(rank)
				a.PutInt(sc.Step, int64(i))
			}
			lr := lrs.AppendEmpty()
			lr.SetEventName(sc.EventPhaseStart)
			lr.SetTimestamp(pcommon.NewTimestampFromTime(t0))
			lr.SetTraceID(tid)
			lr.SetSpanID(sid)
			attrs(lr.Attributes())
			s := spans.AppendEmpty()
			s.SetName("actor_train")
			s.SetTraceID(tid)
			s.SetSpanID(sid)
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(30 * time.Second)))
			attrs(s.Attributes())
		}
		for path, b := range map[string][]byte{
			"/v1/logs":   mustBody(t)((&plog.JSONMarshaler{}).MarshalLogs(ld)),
			"/v1/traces": mustBody(t)((&ptrace.JSONMarshaler{}).MarshalTraces(td)),
		} {
			if code, msg := postJSON(t, "http://"+c.HTTPAddr+path, b, "application/json"); code != 200 {
				t.Fatalf("POST %s: %d %s", path, code, msg)
			}
		}
	}
	c.Stop(t)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	p := st.Phases(float64(now.Add(-time.Minute).Unix()), float64(now.Add(time.Hour).Unix()), lanes)
	got := map[string]string{}
	for i, l := range p.Lanes {
		open := 0
		for _, o := range l.Open {
			if o {
				open++
			}
		}
		got[lanes[i].Key] = fmt.Sprintf("%d closed, %d open", len(l.T0)-open, open)
	}
	want := map[string]string{"n1:0": "30 closed, 0 open", "n1:1": "30 closed, 0 open", "n1:2": "30 closed, 0 open", "n1:3": "30 closed, 0 open"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("phases per lane %v, want %v", got, want)
	}
}
