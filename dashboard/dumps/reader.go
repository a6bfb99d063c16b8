package dumps

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// StepKey names one dump: a train rollout step or an eval step.
type StepKey struct {
	ID   int64
	Eval bool
}

func (k StepKey) base() string {
	if k.Eval {
		return "eval_" + strconv.FormatInt(k.ID, 10)
	}
	return strconv.FormatInt(k.ID, 10)
}

// String is the key as users see it ("3" or "eval_3").
func (k StepKey) String() string { return k.base() }

// NotFoundError is a step or sample that does not exist (HTTP 404).
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string { return e.Msg }

// Options configure a Reader.
type Options struct {
	// CacheDir holds derived data (step summaries). Empty disables the disk cache; the reader never writes
	// into the run directory.
	CacheDir string
	// Settle: an unreadable file younger than this is "still being written" (default DefaultSettle).
	Settle time.Duration
	// MaxOpenSteps bounds the steps kept open (index + file handles), least recently used evicted (default 4).
	MaxOpenSteps int
	// Recheck is how often an open step re-stats its files to notice rewrites and new shards (default 1 s).
	Recheck time.Duration
}

// Reader reads the miles dump directories of one run: rollout_data/, train_data/, dashboard_columns/,
// trajectory/ and tokenizer/. Steps are opened on demand and kept in a small LRU.
type Reader struct {
	root string
	opts Options

	mu      sync.Mutex
	lru     *list.List // of *Step, front = most recent
	open    map[StepKey]*list.Element
	loading map[StepKey]*loadCall

	tokMu  sync.Mutex
	tok    *Tokenizer
	tokErr error
	tokSig string

	sums sync.Map // StepKey → *Summary (computed this process)
}

type loadCall struct {
	done chan struct{}
	st   *Step
	err  error
}

// Open prepares a reader for the run directory root. Nothing is read until asked.
func Open(root string, opts Options) *Reader {
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.MaxOpenSteps <= 0 {
		opts.MaxOpenSteps = 4
	}
	if opts.Recheck <= 0 {
		opts.Recheck = time.Second
	}
	return &Reader{
		root: root, opts: opts, lru: list.New(), open: map[StepKey]*list.Element{},
		loading: map[StepKey]*loadCall{},
	}
}

// Root is the run directory.
func (r *Reader) Root() string { return r.root }

func (r *Reader) path(parts ...string) string {
	return filepath.Join(append([]string{r.root}, parts...)...)
}

// inside says whether a file of the run resolves inside it: a link that leads out of the run directory is
// never followed, the file is treated as absent (docs/operations.md "Exposure").
func (r *Reader) inside(path string) bool { return runfiles.Within(r.root, path) }

// parseRolloutName parses "<id>.pt" and "eval_<id>.pt".
func parseRolloutName(name string) (StepKey, bool) {
	base, ok := strings.CutSuffix(name, ".pt")
	if !ok {
		return StepKey{}, false
	}
	k := StepKey{}
	if rest, ok := strings.CutPrefix(base, "eval_"); ok {
		k.Eval, base = true, rest
	}
	id, err := strconv.ParseInt(base, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != base {
		return StepKey{}, false
	}
	k.ID = id
	return k, true
}

// StepFile describes a step's files on disk.
type StepFile struct {
	Key        StepKey
	Size       int64
	ModTime    time.Time
	TrainRanks int
	Sidecar    bool
	Columns    bool
}

// List returns every step with a rollout dump, train steps first then eval, by id.
func (r *Reader) List() ([]StepFile, error) {
	ents, err := os.ReadDir(r.path("rollout_data"))
	if errors.Is(err, fs.ErrNotExist) {
		return []StepFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	shards := r.shardCounts()
	side := dirNames(r.path("trajectory"))
	cols := dirNames(r.path("dashboard_columns"))
	out := []StepFile{}
	for _, e := range ents {
		k, ok := parseRolloutName(e.Name())
		if !ok || e.IsDir() || !r.inside(r.path("rollout_data", e.Name())) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		sf := StepFile{
			Key: k, Size: fi.Size(), ModTime: fi.ModTime(), Sidecar: side[k.base()+".jsonl"],
			Columns: cols["rollout_"+k.base()+".parquet"],
		}
		if !k.Eval {
			sf.TrainRanks = shards[k.ID]
		}
		out = append(out, sf)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key.Eval != out[j].Key.Eval {
			return !out[i].Key.Eval
		}
		return out[i].Key.ID < out[j].Key.ID
	})
	return out, nil
}

func dirNames(dir string) map[string]bool {
	m := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		m[e.Name()] = e.Type()&fs.ModeSymlink == 0 || runfiles.Within(filepath.Dir(dir), filepath.Join(dir, e.Name()))
	}
	return m
}

func parseShardName(name string) (id int64, rank int, ok bool) {
	base, ok := strings.CutSuffix(name, ".pt")
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(base, "_")
	if !ok {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(a, 10, 64)
	rk, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || id < 0 || rk < 0 || strconv.FormatInt(id, 10) != a || strconv.Itoa(rk) != b {
		return 0, 0, false
	}
	return id, rk, true
}

func (r *Reader) shardCounts() map[int64]int {
	m := map[int64]int{}
	ents, _ := os.ReadDir(r.path("train_data"))
	for _, e := range ents {
		if id, _, ok := parseShardName(e.Name()); ok {
			m[id]++
		}
	}
	return m
}

func (r *Reader) shardFiles(id int64) []shardFile {
	var out []shardFile
	ents, _ := os.ReadDir(r.path("train_data"))
	for _, e := range ents {
		if sid, rk, ok := parseShardName(e.Name()); ok && sid == id && r.inside(r.path("train_data", e.Name())) {
			out = append(out, shardFile{
				rank: rk, path: r.path("train_data", e.Name()),
				shown: "train_data/" + e.Name(),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rank < out[j].rank })
	return out
}

// fileStamp identifies a file version.
type fileStamp struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
}

func stamp(path, name string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return fileStamp{Name: name, Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}, true
}

// Step is one open dump: the sample index of its rollout dump, its resolved train shards, and optional
// parquet mirror and sidecar. Per-token data stays in the files until a sample is read.
type Step struct {
	Key     StepKey
	Samples []*Sample
	byIndex map[int64]*Sample
	groups  map[int64][]int64

	r       *Reader
	rollout *Archive
	train   *trainStep
	columns *columnsFile
	sidecar *sidecarFile
	sources []fileStamp
	checked time.Time

	refs    int
	evicted bool
}

// Acquire opens (or finds) a step. Call the returned release when done with it.
func (r *Reader) Acquire(k StepKey) (*Step, func(), error) {
	for {
		r.mu.Lock()
		if el, ok := r.open[k]; ok {
			st := el.Value.(*Step)
			if time.Since(st.checked) < r.opts.Recheck || r.unchanged(st) {
				st.checked = time.Now()
				r.lru.MoveToFront(el)
				st.refs++
				r.mu.Unlock()
				return st, r.releaser(st), nil
			}
			r.evictLocked(el)
		}
		if lc, ok := r.loading[k]; ok {
			r.mu.Unlock()
			<-lc.done
			if lc.err != nil {
				return nil, nil, lc.err
			}
			continue
		}
		lc := &loadCall{done: make(chan struct{})}
		r.loading[k] = lc
		r.mu.Unlock()

		st, err := r.openStep(k)
		r.mu.Lock()
		delete(r.loading, k)
		lc.st, lc.err = st, err
		close(lc.done)
		if err != nil {
			r.mu.Unlock()
			return nil, nil, err
		}
		st.checked = time.Now()
		r.open[k] = r.lru.PushFront(st)
		for r.lru.Len() > r.opts.MaxOpenSteps {
			r.evictLocked(r.lru.Back())
		}
		st.refs++
		r.mu.Unlock()
		return st, r.releaser(st), nil
	}
}

func (r *Reader) releaser(st *Step) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			st.refs--
			closeNow := st.evicted && st.refs == 0
			r.mu.Unlock()
			if closeNow {
				st.close()
			}
		})
	}
}

func (r *Reader) evictLocked(el *list.Element) {
	st := el.Value.(*Step)
	r.lru.Remove(el)
	delete(r.open, st.Key)
	st.evicted = true
	if st.refs == 0 {
		st.close()
	}
}

// Close closes every open step.
func (r *Reader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.lru.Len() > 0 {
		r.evictLocked(r.lru.Back())
	}
}

func (st *Step) close() {
	st.rollout.Close()
	if st.train != nil {
		st.train.close()
	}
	if st.columns != nil {
		st.columns.close()
	}
}

func (r *Reader) currentSources(k StepKey) []fileStamp {
	var out []fileStamp
	name := "rollout_data/" + k.base() + ".pt"
	if s, ok := stamp(r.path(name), name); ok {
		out = append(out, s)
	}
	if !k.Eval {
		for _, f := range r.shardFiles(k.ID) {
			if s, ok := stamp(f.path, f.shown); ok {
				out = append(out, s)
			}
		}
	}
	for _, name := range []string{"dashboard_columns/rollout_" + k.base() + ".parquet", "trajectory/" + k.base() + ".jsonl"} {
		if s, ok := stamp(r.path(name), name); ok {
			out = append(out, s)
		}
	}
	return out
}

func (r *Reader) unchanged(st *Step) bool {
	cur := r.currentSources(st.Key)
	if len(cur) != len(st.sources) {
		return false
	}
	for i := range cur {
		if cur[i] != st.sources[i] {
			return false
		}
	}
	return true
}

func (r *Reader) openStep(k StepKey) (*Step, error) {
	name := "rollout_data/" + k.base() + ".pt"
	srcs := r.currentSources(k)
	if len(srcs) == 0 || srcs[0].Name != name || !r.inside(r.path(name)) {
		return nil, &NotFoundError{"no rollout dump " + name}
	}
	a, err := openArchive(r.root, r.path(name), name, r.opts.Settle)
	if errors.Is(err, runfiles.ErrOutsideRun) { // swapped for a link out since the check above
		return nil, &NotFoundError{"no rollout dump " + name}
	}
	if err != nil {
		return nil, err
	}
	samples, err := indexRollout(a)
	if err != nil {
		a.Close()
		return nil, classify(name, a.ModTime, r.opts.Settle, err)
	}
	st := &Step{
		Key: k, Samples: samples, byIndex: make(map[int64]*Sample, len(samples)),
		groups: map[int64][]int64{}, r: r, rollout: a, sources: srcs,
	}
	for _, s := range samples {
		st.byIndex[s.Index] = s
		st.groups[s.Group] = append(st.groups[s.Group], s.Index)
	}
	for _, g := range st.groups {
		slices.Sort(g)
	}
	if !k.Eval {
		if files := r.shardFiles(k.ID); len(files) > 0 {
			ts, err := indexTrain(r.root, files, r.opts.Settle)
			if err != nil {
				a.Close()
				return nil, err
			}
			st.train = ts
		}
	}
	// A mirror or sidecar that leads out of the run is not read: the rollout dump has the same lists.
	cname := "dashboard_columns/rollout_" + k.base() + ".parquet"
	if r.inside(r.path(cname)) {
		if c, err := openColumns(r.root, r.path(cname), cname, r.opts.Settle); err == nil {
			st.columns = c
		} else if !errors.Is(err, fs.ErrNotExist) {
			if _, ok := errors.AsType[*UnavailableError](err); ok {
				st.close()
				return nil, err
			}
			// a corrupt mirror is not fatal: the rollout dump has the same lists
		}
	}
	sname := "trajectory/" + k.base() + ".jsonl"
	if r.inside(r.path(sname)) {
		if sc, err := openSidecar(r.root, r.path(sname)); err == nil {
			st.sidecar = sc
		}
	}
	return st, nil
}

// Sample returns a sample by its run-global index.
func (st *Step) Sample(idx int64) (*Sample, error) {
	s, ok := st.byIndex[idx]
	if !ok {
		return nil, &NotFoundError{fmt.Sprintf("step %s has no sample %d", st.Key, idx)}
	}
	return s, nil
}

// Group returns the sample indexes of a group, sorted.
func (st *Step) Group(g int64) []int64 { return st.groups[g] }

// HasTrain tells whether train shards were found.
func (st *Step) HasTrain() bool { return st.train != nil }

// TrainRanks is the number of train shards.
func (st *Step) TrainRanks() int {
	if st.train == nil {
		return 0
	}
	return len(st.train.shards)
}

// HasColumns tells whether the parquet mirror is used.
func (st *Step) HasColumns() bool { return st.columns != nil }

// Conversation returns the normalized sidecar row of a sample, or nil when the sidecar has none.
func (st *Step) Conversation(idx int64) (*Conversation, error) {
	if st.sidecar == nil {
		return nil, nil
	}
	row, err := st.sidecar.row(idx)
	if err != nil || row == nil {
		return nil, err
	}
	return normalizeConversation(idx, row)
}

// HasSidecar tells whether a trajectory sidecar exists.
func (st *Step) HasSidecar() bool { return st.sidecar != nil }

// Text returns a sample's prompt (when a plain string) and response text.
func (st *Step) Text(s *Sample) (prompt, response string, err error) {
	if prompt, err = s.prompt.read(st.rollout); err != nil {
		return prompt, response, err
	}
	response, err = s.response.read(st.rollout)
	return prompt, response, err
}

// Tokenizer returns the run's tokenizer (tokenizer/tokenizer.json), reloaded when the file changes; nil
// without one.
func (r *Reader) Tokenizer() (*Tokenizer, error) {
	p := r.path("tokenizer", "tokenizer.json")
	s, ok := stamp(p, "tokenizer.json")
	ok = ok && r.inside(p)
	r.tokMu.Lock()
	defer r.tokMu.Unlock()
	if !ok {
		r.tok, r.tokErr, r.tokSig = nil, nil, ""
		return nil, nil
	}
	sig := fmt.Sprint(s)
	if sig != r.tokSig {
		r.tok, r.tokErr = loadTokenizer(r.root, p)
		if errors.Is(r.tokErr, runfiles.ErrOutsideRun) { // swapped for a link out since the check above
			r.tok, r.tokErr = nil, nil
		}
		r.tokSig = sig
	}
	return r.tok, r.tokErr
}
