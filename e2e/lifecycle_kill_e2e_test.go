package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The simulated run both halves of the kill test send: deterministic for the seed and start time, paced so
// that the collector can be killed in the middle of it.
var killRunArgs = []string{
	"--fast-forward", "--mode", "async", "--nodes", "2", "--steps", "12", "--seed", "7",
	"--start", "2026-01-01T00:00:00Z", "--max-speed", "150", "--quiet", "--give-up", "2m",
}

// trajectorySpanIDs reads every trajectories record of the run (failing on a torn or invalid line) and returns
// the span ids with how often each was written, and the spans by trace.
func trajectorySpanIDs(t *testing.T, runDir string) (map[string]int, map[string][]string) {
	t.Helper()
	ids, byTrace := map[string]int{}, map[string][]string{}
	for _, s := range e2etest.TrajectorySpans(t, runDir) {
		id, _ := s["span"].(string)
		ids[id]++
		if ids[id] == 1 {
			tr, _ := s["trace"].(string)
			byTrace[tr] = append(byTrace[tr], id)
		}
	}
	return ids, byTrace
}

// TestKillCollectorKeepsAcknowledgedTrajectories: the files take raw trajectory spans (docs/semconv.md §3.1),
// so a collector killed with SIGKILL under trajectory load from miles-sim loses at most what its batch processor
// and its jsonl exporter held (one flush interval, docs/operations.md), not every span of the samples in flight.
// Restarted on the same run directory while the simulator retries, the run's lifecycle answers (per-step
// staleness, known fraction, mixed versions) equal those of a clean run of the same seed for every step whose
// spans all reached the files.
func TestKillCollectorKeepsAcknowledgedTrajectories(t *testing.T) {
	sim := buildSim(t)

	// The clean run.
	cleanDir := t.TempDir()
	c := e2etest.StartCollector(t, cleanDir, e2etest.Options{})
	start := time.Now()
	if out, err := exec.Command(sim, append(killRunArgs, "--endpoint", c.HTTPAddr)...).CombinedOutput(); err != nil {
		t.Fatalf("miles-sim: %v\n%s", err, out)
	}
	cleanWall := time.Since(start).Seconds()
	c.Stop(t)
	clean, cleanByTrace := trajectorySpanIDs(t, cleanDir)
	if len(clean) < 1000 {
		t.Fatalf("clean run wrote %d trajectory spans", len(clean))
	}

	// The same run, the collector SIGKILLed once a third of the trajectory spans reached the files, and
	// restarted on the same ports and run directory.
	runDir := t.TempDir()
	c = e2etest.StartCollector(t, runDir, e2etest.Options{})
	cmd := exec.Command(sim, append(killRunArgs, "--endpoint", c.HTTPAddr)...)
	var simOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &simOut, &simOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	simDone := make(chan error, 1)
	go func() { simDone <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	e2etest.Eventually(t, 2*time.Minute, "a third of the trajectory spans on disk", func() bool {
		n := 0
		for _, r := range e2etest.Records(t, runDir, sc.StreamTrajectories) {
			spans, _ := r["spans"].([]any)
			n += len(spans)
		}
		return n > len(clean)/3
	})
	c.Kill()
	c = e2etest.StartCollector(t, runDir, e2etest.Options{GRPCAddr: c.GRPCAddr, HTTPAddr: c.HTTPAddr})
	select {
	case err := <-simDone:
		if err != nil {
			t.Fatalf("miles-sim: %v\n%s", err, simOut.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("miles-sim did not finish:\n%s", simOut.String())
	}
	c.Stop(t)
	got, _ := trajectorySpanIDs(t, runDir)

	lost := 0
	for id := range clean {
		if got[id] == 0 {
			lost++
		}
	}
	for id := range got {
		if clean[id] == 0 {
			t.Fatalf("span %s written by the killed run only: the runs are not the same", id)
		}
	}
	// What a kill may lose: the spans acknowledged within one flush interval of the exporter (1 s) plus the batch
	// processor's timeout (200 ms), at the clean run's rate, with half again for an uneven rate.
	rate := float64(len(clean)) / cleanWall
	allowed := int(math.Ceil(1.5 * rate * 1.2))
	t.Logf("%d of %d trajectory spans lost (allowed %d: %.0f spans/s)", lost, len(clean), allowed, rate)
	if lost > allowed {
		t.Fatalf("%d trajectory spans lost at one kill, more than one flush interval's worth (%d)", lost, allowed)
	}

	// The lifecycle: equal to the clean run for every step whose spans (its step consume and every span of the
	// traces it links, as the clean run wrote them) all reached the files.
	open := func(dir string) *store.Store {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cleanSt, killedSt := open(cleanDir), open(runDir)
	killedSteps := map[int]store.StepSummary{}
	for _, s := range killedSt.LifecycleSteps() {
		killedSteps[s.Step] = s
	}
	whole, known := 0, 0
	for _, s := range cleanSt.LifecycleSteps() {
		if s.Status != sc.LifecycleStatusKnown {
			t.Fatalf("clean run step %d: lifecycle %q", s.Step, s.Status)
		}
		k, ok := killedSteps[s.Step]
		if !ok {
			continue
		}
		a, err := cleanSt.Anatomy(s.Step, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		arrived := true
		for _, row := range a.Rows {
			for _, id := range cleanByTrace[row.Trace] {
				arrived = arrived && got[id] > 0
			}
		}
		if !arrived {
			continue
		}
		whole++
		if k.Status == sc.LifecycleStatusKnown {
			known++
		}
		if stepNumbers(k) != stepNumbers(s) {
			t.Fatalf("step %d after the kill: %+v, clean run %+v", s.Step, k, s)
		}
	}
	t.Logf("%d of %d steps arrived whole after the kill, %d known", whole, len(killedSteps), known)
	if whole < len(killedSteps)/2 {
		t.Fatalf("only %d of %d steps arrived whole", whole, len(killedSteps))
	}
}

func stepNumbers(s store.StepSummary) string {
	f := func(v *float64) string {
		if v == nil {
			return "absent"
		}
		return fmt.Sprint(*v)
	}
	return fmt.Sprint(s.Status, s.Samples, s.Known, f(s.StalenessMean), f(s.StalenessMax), f(s.MixedFrac))
}
