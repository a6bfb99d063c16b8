package lifecycleprocessor

import (
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/goldenfile"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestGoldenColocate: a synchronous colocate run reads staleness 0 everywhere — every segment lag 0, every
// sample and step staleness 0, nothing mixed — although consume spans regularly arrive before the last spans of
// their samples.
func TestGoldenColocate(t *testing.T) {
	r := colocateRun(1, 4, 6)
	h := newHarness(t, testConfig())
	r.play(h, math.Inf(-1), math.Inf(1))
	h.runTo(h.clock().Sub(base).Seconds() + 30)
	out := h.output()
	checkTruth(t, r, out, true)
	for _, w := range r.samples {
		if _, _, st := w.staleness(); st != 0 {
			t.Fatalf("simulation error: colocate sample with staleness %d", st)
		}
	}
	golden(t, "colocate.jsonl", r, out)
}

// TestGoldenAsync: a fully-async run where samples span several versions, wait in the buffer across steps, and
// partial-rollout samples are resumed in a later step: every annotation equals the simulation's bookkeeping.
func TestGoldenAsync(t *testing.T) {
	r := asyncRun(2, 6, 6)
	h := newHarness(t, testConfig())
	r.play(h, math.Inf(-1), math.Inf(1))
	h.runTo(h.clock().Sub(base).Seconds() + 30)
	out := h.output()
	checkTruth(t, r, out, true)
	// The run must exercise what it claims to.
	var stale, mixed, resumed, lagged int
	for _, w := range r.samples {
		minV, maxV, st := w.staleness()
		if st > 0 {
			stale++
		}
		if minV != maxV {
			mixed++
		}
		if w.attempts > 1 {
			resumed++
		}
	}
	for _, s := range r.segs {
		if s.trainer > s.version {
			lagged++
		}
	}
	if stale == 0 || mixed == 0 || resumed == 0 || lagged == 0 {
		t.Fatalf("async run too tame: %d stale, %d mixed, %d resumed samples, %d lagging segments", stale, mixed, resumed, lagged)
	}
	golden(t, "async.jsonl", r, out)
}

// checkTruth compares the processor's annotations with the simulation. With all, every consumed sample and every
// segment must be annotated as known; otherwise (restarts, late data) an annotation may be unknown but never
// differ from the truth. It returns the number of known consume spans.
func checkTruth(t *testing.T, r *runSim, out map[pcommon.SpanID]ptrace.Span, all bool) int {
	t.Helper()
	known := 0
	for _, w := range r.samples {
		s, ok := out[w.consume]
		if !ok {
			t.Fatalf("consume span of sample trace %s not passed on", w.trace)
		}
		status := strAttr(s, sc.LifecycleStatus)
		if status != sc.LifecycleStatusKnown {
			if all {
				t.Fatalf("sample %s: status %q (%s), want known", w.trace, status, strAttr(s, sc.LifecycleUnknownReason))
			}
			if status != sc.LifecycleStatusUnknown || strAttr(s, sc.LifecycleUnknownReason) == "" {
				t.Fatalf("sample %s: status %q reason %q", w.trace, status, strAttr(s, sc.LifecycleUnknownReason))
			}
			if _, has := s.Attributes().Get(sc.LifecycleStaleness); has {
				t.Fatalf("unknown sample %s carries a staleness", w.trace)
			}
			continue
		}
		known++
		minV, maxV, st := w.staleness()
		got := map[string]any{}
		want := map[string]any{}
		for _, kv := range []struct {
			key string
			v   int64
		}{
			{sc.LifecycleStaleness, st},
			{sc.LifecycleVersionMin, minV},
			{sc.LifecycleVersionMax, maxV},
			{sc.LifecycleTurns, w.turns},
			{sc.LifecycleToolCalls, w.toolCalls},
			{sc.LifecycleAttempts, w.attempts},
		} {
			v, _ := intAttr(t, s, kv.key)
			got[kv.key], want[kv.key] = v, kv.v
		}
		mixed, _ := s.Attributes().Get(sc.LifecycleMixedVersion)
		got["mixed"], want["mixed"] = mixed.Bool(), minV != maxV
		var wv, wst []int64
		var wspans []string
		for _, sg := range w.segs {
			wv = append(wv, sg.version)
			wst = append(wst, w.cv-sg.version)
			wspans = append(wspans, sg.span.String())
		}
		got["versions"], want["versions"] = intsAttr(s, sc.LifecycleSegmentVersions), wv
		got["seg_staleness"], want["seg_staleness"] = intsAttr(s, sc.LifecycleSegmentStaleness), wst
		var gspans []string
		if v, ok := s.Attributes().Get(sc.LifecycleSegmentSpans); ok {
			for _, x := range v.Slice().All() {
				gspans = append(gspans, x.Str())
			}
		}
		got["spans"], want["spans"] = gspans, wspans
		q, _ := s.Attributes().Get(sc.LifecycleQueueTime)
		if math.Abs(q.Double()-w.queue) > 1e-6 {
			t.Errorf("sample %s: queue time %.6f, want %.6f", w.trace, q.Double(), w.queue)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sample %s (step %d, consumed at v%d):\n got %v\nwant %v", w.trace, w.step, w.cv, got, want)
		}
	}
	for id, sg := range r.segs {
		s, ok := out[id]
		if !ok {
			continue // emitted after the run's end
		}
		tv, has := intAttr(t, s, sc.LifecycleTrainerVersion)
		lag, hasLag := intAttr(t, s, sc.LifecycleLag)
		if !has {
			if all {
				t.Fatalf("segment %s: no trainer version", id)
			}
			if hasLag {
				t.Fatalf("segment %s: lag without trainer version", id)
			}
			continue
		}
		if tv != sg.trainer || !hasLag || lag != sg.trainer-sg.version {
			t.Fatalf("segment %s (v%d): trainer_version %d lag %d, want %d and %d", id, sg.version, tv, lag, sg.trainer, sg.trainer-sg.version)
		}
	}
	for _, ws := range r.steps {
		s, ok := out[ws.span]
		if !ok {
			t.Fatalf("step %d consume span not passed on", ws.step)
		}
		n, _ := intAttr(t, s, sc.LifecycleStepSamples)
		k, _ := intAttr(t, s, sc.LifecycleStepKnown)
		if n != int64(len(ws.samples)) {
			t.Fatalf("step %d: %d samples, want %d", ws.step, n, len(ws.samples))
		}
		var sum, maxSt, nMixed, nKnown int64
		for _, tr := range ws.samples {
			w := r.samples[tr]
			if strAttr(out[w.consume], sc.LifecycleStatus) != sc.LifecycleStatusKnown {
				continue
			}
			minV, maxV, st := w.staleness()
			nKnown++
			sum += st
			maxSt = max(maxSt, st)
			if minV != maxV {
				nMixed++
			}
		}
		if k != nKnown {
			t.Fatalf("step %d: %d known, want %d (the known consume spans)", ws.step, k, nKnown)
		}
		wantStatus := sc.LifecycleStatusPartial
		switch {
		case nKnown == 0:
			wantStatus = sc.LifecycleStatusUnknown
		case nKnown == int64(len(ws.samples)):
			wantStatus = sc.LifecycleStatusKnown
		}
		if got := strAttr(s, sc.LifecycleStatus); got != wantStatus {
			t.Fatalf("step %d: status %q, want %q", ws.step, got, wantStatus)
		}
		if all && wantStatus != sc.LifecycleStatusKnown && len(ws.samples) > 0 {
			t.Fatalf("step %d: status %q", ws.step, wantStatus)
		}
		if nKnown == 0 {
			if _, has := s.Attributes().Get(sc.LifecycleStepStalenessMean); has {
				t.Fatalf("step %d: mean staleness without known samples", ws.step)
			}
			continue
		}
		mean, _ := s.Attributes().Get(sc.LifecycleStepStalenessMean)
		frac, _ := s.Attributes().Get(sc.LifecycleStepMixedVersionFrac)
		mx, _ := intAttr(t, s, sc.LifecycleStepStalenessMax)
		if math.Abs(mean.Double()-float64(sum)/float64(nKnown)) > 1e-9 || mx != maxSt ||
			math.Abs(frac.Double()-float64(nMixed)/float64(nKnown)) > 1e-9 {
			t.Fatalf("step %d: mean %.4f max %d mixed %.4f, want %.4f %d %.4f", ws.step, mean.Double(), mx, frac.Double(),
				float64(sum)/float64(nKnown), maxSt, float64(nMixed)/float64(nKnown))
		}
	}
	return known
}

// golden compares the annotated spans (generate, consume, step_consume), one JSON line each, sorted, with
// testdata/golden/name. Regenerate deliberately with `go test -run Golden -update`.
func golden(t *testing.T, name string, _ *runSim, out map[pcommon.SpanID]ptrace.Span) {
	t.Helper()
	var lines []string
	for _, s := range out {
		typ := strAttr(s, sc.SpanType)
		if typ != sc.SpanTypeGenerate && typ != sc.SpanTypeConsume && typ != sc.SpanTypeStepConsume {
			continue
		}
		rec := map[string]any{"type": typ, "span": s.SpanID().String()}
		a := map[string]any{}
		for k, v := range s.Attributes().All() {
			switch k {
			case sc.SampleIndex, sc.Attempt, sc.Turn, sc.WeightVersion, sc.Step:
				rec[strings.TrimPrefix(k, "miles.")] = v.AsRaw()
			default:
				if after, ok := strings.CutPrefix(k, "miles.lifecycle."); ok {
					a[after] = v.AsRaw()
				}
			}
		}
		rec["a"] = a
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	if !goldenfile.Assert(t, filepath.Join("testdata", "golden", name), []byte(got)) {
		t.FailNow()
	}
}
