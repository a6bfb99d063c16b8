package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Settled steps' facts (docs/semconv.md §12.1 "Settled steps"). A step's facts are computed from the files of
// the hours around it alone: its phases (phaseReach hours on either side: phases are filed by end hour), its
// batch's consume near it and the anatomy's lookback before that, and the engine spans of its chain, which ran
// in those hours. Once every one of those files is settled (compacted, or plain and left alone for
// plainSettled) the facts cannot change until a file does. They are then kept in the memo across arrivals
// (a live run's table computes only its newest steps again) and saved in the cache directory beside the GPU
// columns (derived data, never written into the run directory), keyed by the step's window, the trainer lanes
// and every input file's shard, size and mtime: a fresh process answers every step whose files did not change
// without reading the run. The MFU comes from the logged metrics at each answer (a live run logs it after the
// step's files settle).

// factsCacheMagic versions the saved facts; facts computed by other code are computed again.
const factsCacheMagic = "MILESEF1"

// factsCacheMax bounds a saved step's file (a step's facts are a few KB; its path a few dozen edges).
const factsCacheMax = 4 << 20

// savedFacts is a settled step's facts as saved: the answer's fields and the links and path a step's
// explanation shows, with the inputs' key they were computed from.
type savedFacts struct {
	Magic string                  `json:"magic"`
	Key   string                  `json:"key"`
	Facts ExplainStepFacts        `json:"facts"`
	Links map[string]ExplainLinks `json:"links"`
	Path  []ExplainEdge           `json:"path"`
}

// settledFacts is a settled step's facts with the key of the inputs they were computed from.
type settledFacts struct {
	key string
	f   *ExplainStepFacts
}

// factsHours are the hours step st's facts may read (in every stream they read).
func factsHours(st Bubble) (lo, hi int64) {
	lo = min(hourOf(st.T0)-phaseReach, hourOf(st.T0-consumeSlack-AnatomyLookback))
	hi = max(hourOf(st.T1)+phaseReach, hourOf(st.T1+consumeSlack)+1)
	return lo, hi
}

// inputsKey is the identity of what closed step st's facts are computed from: its window, the trainer lanes and
// every file of factsHours in the streams they read; "" when one of those files is not settled. stats memoizes
// the files' stats over one answer's steps (nil: stat every file).
func (ex *explainer) inputsKey(st Bubble, stats map[string]os.FileInfo) string {
	s := ex.s
	lo, hi := factsHours(st)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00", factsCacheMagic, st.Step,
		strconv.FormatFloat(st.T0, 'g', -1, 64), strconv.FormatFloat(st.T1, 'g', -1, 64))
	for _, l := range ex.train {
		fmt.Fprintf(h, "%s\x00", l.ID)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Phases hours past the step's next one hold nothing of it but phases that began before it ended (phases are
	// filed by end hour; a marker by its start): while such an hour is still written (a live run's newest hours,
	// within phaseReach of every recent step), its part is those phases as read, not its files.
	later := hourOf(st.T1+consumeSlack) + 1
	for _, in := range []struct {
		name  string
		files *partition.Stream
	}{{sc.StreamPhases, s.phases.files}, {sc.StreamTrajectories, s.trajectories.files}, {sc.StreamEngineTraces, s.engineTraces.files}} {
		for hour := lo; hour <= hi; hour++ {
			p := in.files.Parts[hour]
			if p == nil {
				continue
			}
			var part []byte
			settled := true
			for _, f := range p.Files {
				path, plain := f.Zst, false
				switch {
				case f.Plain != "" && f.Zst != "":
					settled = false // being compacted
				case f.Plain != "":
					path, plain = f.Plain, true
				case f.Zst == "":
					continue
				}
				if !settled {
					break
				}
				fi, ok := stats[path]
				if !ok {
					var err error
					if fi, err = os.Stat(path); err != nil {
						fi = nil
					}
					if stats != nil {
						stats[path] = fi
					}
				}
				if fi == nil || !fi.Mode().IsRegular() || plain && time.Since(fi.ModTime()) < plainSettled {
					settled = false
					break
				}
				part = fmt.Appendf(part, "%s\x00%d\x00%s\x00%t\x00%d\x00%d\x00", in.name, hour, f.Shard, plain, fi.Size(), fi.ModTime().UnixNano())
			}
			switch {
			case settled:
				h.Write(part)
			case in.name == sc.StreamPhases && hour > later:
				b := s.phases.blocks[hour]
				if b == nil {
					return ""
				}
				fmt.Fprintf(h, "%s\x00%d\x00", in.name, hour)
				for _, rs := range [][]phaseRec{b.closed, b.open} {
					for i := range rs {
						if r := &rs[i]; r.T0 < st.T1 {
							fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%s\x00%d\x00%t\x00", strconv.FormatFloat(r.T0, 'g', -1, 64),
								strconv.FormatFloat(r.end, 'g', -1, 64), r.Name, r.Rank, r.Node, r.PID, r.isOpen)
							fmt.Fprintf(h, "%s\x00%s\x00", r.Span, r.Parent)
						}
					}
				}
			default:
				return ""
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// holdLaterPhases loads the phases hours that the asked closed steps' inputs keys take as they are held (past
// each step's next hour, still being written) when the store does not hold them: a live page holds the newest
// hours already.
func (ex *explainer) holdLaterPhases(asked []stepAsked) {
	s := ex.s
	var want []int64
	s.mu.RLock()
	for _, a := range asked {
		if a.open {
			continue
		}
		lo, hi := factsHours(a.st)
		for h := max(lo, hourOf(a.st.T1+consumeSlack)+2); h <= hi; h++ {
			if p := s.phases.files.Parts[h]; p != nil && p.HasPlain() && s.phases.blocks[h] == nil {
				want = append(want, h)
			}
		}
	}
	s.mu.RUnlock()
	slices.Sort(want)
	for _, h := range slices.Compact(want) {
		s.ensureHours(h, h, s.phases.cache)
	}
}

// settled is step a's facts kept for inputs key, from the memo or the cache directory; nil when none are.
func (ex *explainer) settled(a stepAsked, key string) *ExplainStepFacts {
	k := a.key()
	if ex.memo != nil {
		ex.memo.mu.Lock()
		e, ok := ex.memo.settled[k]
		ex.memo.mu.Unlock()
		if ok && e.key == key {
			return ex.withMFU(e.f)
		}
	}
	dir, path := ex.factsPath(a.st.Step)
	if path == "" {
		return nil
	}
	b, err := runfiles.ReadFileMax(dir, path, factsCacheMax)
	if err != nil {
		return nil
	}
	var saved savedFacts
	if json.Unmarshal(b, &saved) != nil || saved.Magic != factsCacheMagic || saved.Key != key {
		return nil // another version, or other inputs: computed again and overwritten
	}
	f := saved.Facts
	if f.Step != a.st.Step || f.T0 != a.st.T0 || f.T1 != a.st.T1 || f.Causes == nil || f.Phases == nil {
		return nil
	}
	f.links, f.path = saved.Links, saved.Path
	if f.links == nil {
		f.links = map[string]ExplainLinks{}
	}
	ex.keepSettled(k, key, &f)
	return ex.withMFU(&f)
}

// withMFU is settled facts with the step's MFU as logged now.
func (ex *explainer) withMFU(f *ExplainStepFacts) *ExplainStepFacts {
	c := *f
	c.MFU = nil
	if v, ok := ex.mfu[f.Step]; ok {
		c.MFU = &v
	}
	return &c
}

// keepSettled keeps a settled step's facts in the memo.
func (ex *explainer) keepSettled(k explainKey, key string, f *ExplainStepFacts) {
	if ex.memo == nil {
		return
	}
	ex.memo.mu.Lock()
	defer ex.memo.mu.Unlock()
	if ex.memo.settled == nil {
		ex.memo.settled = map[explainKey]settledFacts{}
	}
	ex.memo.settled[k] = settledFacts{key, f}
}

// saveSettled keeps a step's facts computed from settled inputs key, in the memo and (in the background) in the
// cache directory. Facts that do not encode (a NaN) are kept in the memo alone.
func (ex *explainer) saveSettled(a stepAsked, key string, f *ExplainStepFacts) {
	ex.keepSettled(a.key(), key, f)
	_, path := ex.factsPath(a.st.Step)
	if path == "" {
		return
	}
	saved := savedFacts{Magic: factsCacheMagic, Key: key, Facts: *f, Links: f.links, Path: f.path}
	saved.Facts.MFU = nil
	ex.s.saveCachedJSON(path, &saved)
}

// factsPath is the cache directory and the file a settled step's facts are saved in ("" without a cache
// directory): one per step of the run, holding the key of the inputs it was computed from.
func (ex *explainer) factsPath(step int) (dir, path string) {
	s := ex.s
	s.mu.RLock()
	dir, run := s.gpu.cacheDir, s.gpu.runCacheDir()
	s.mu.RUnlock()
	if run == "" {
		return "", ""
	}
	return dir, filepath.Join(run, "explain", fmt.Sprintf("step_%d.json", step))
}

// settleBatch is how many steps SettleExplanations computes at once: consecutive steps share their lookback's
// hours, which a batch reads once; a query that arrives waits for at most one batch on one core.
const settleBatch = 8

// SettleExplanations computes, newest first, the facts of the run's closed steps whose inputs are settled and
// that are neither kept in memo nor saved in the cache directory (docs/semconv.md §12.1 "Settled steps"), a
// batch of steps at a time on one core while idle says nothing else is asked of the dashboard, so that an
// explanation or the compare page's table asked later reads them instead of the run. It returns how many steps
// it computed, and how many it left (idle turned false, or inputs changed meanwhile): none when every closed step
// whose inputs are settled is kept.
func (s *Store) SettleExplanations(memo *ExplainMemo, idle func() bool) (computed, left int) {
	if memo == nil {
		return 0, 0
	}
	steps, _ := s.explainSteps(func([]Bubble) bool { return false })
	ex := s.newExplainer(memo)
	stats := map[string]os.FileInfo{}
	type settling struct {
		a   stepAsked
		key string
	}
	var todo []settling
	for _, st := range slices.Backward(steps) {
		a := stepAsked{st: st}
		key := ex.inputsKey(a.st, stats)
		if key == "" || ex.settled(a, key) != nil {
			continue
		}
		memo.mu.Lock()
		unkept := memo.unkept[a.key()] == key
		memo.mu.Unlock()
		if !unkept {
			todo = append(todo, settling{a, key})
		}
	}
	for len(todo) > 0 && idle() {
		batch := todo[:min(settleBatch, len(todo))]
		todo = todo[len(batch):]
		asked := make([]stepAsked, len(batch))
		for i, b := range batch {
			asked[i] = b.a
		}
		held := s.heldNow()
		unpin := s.pin()
		ex := s.newExplainer(memo)
		ex.oneCore = true
		ex.factsOf(asked)
		unpin()
		s.coldSince(held)
		computed += len(batch)
		// A step computed from the inputs it was picked for and not kept (its batch's consume was far from it)
		// is not computed again while they hold; one whose inputs changed meanwhile is, on the next call.
		stats := map[string]os.FileInfo{}
		for _, b := range batch {
			if ex.inputsKey(b.a.st, stats) != b.key {
				continue
			}
			memo.mu.Lock()
			if e, ok := memo.settled[b.a.key()]; !ok || e.key != b.key {
				if memo.unkept == nil {
					memo.unkept = map[explainKey]string{}
				}
				memo.unkept[b.a.key()] = b.key
			}
			memo.mu.Unlock()
		}
	}
	return computed, len(todo)
}
