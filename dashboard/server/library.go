package server

import (
	"container/list"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The run library (docs/dashboard-api.md "Run library"): every run under one root directory, found by a cheap
// scan (directory listings, meta.json, the lane catalog and the tails of the newest partitions, cached by file
// stamps; no stream is parsed), listed at /api/v1/runs; any other API request names its run with ?run=<id>
// and is answered by that run's own Server, opened on first use and kept in a small LRU. A run id is the
// run's path under the root with "/" separators, and is looked up among the runs found, never turned into a
// path.

// LibraryOptions configure a Library; nothing is set after NewLibrary.
type LibraryOptions struct {
	// Root is the directory whose runs are served (required).
	Root string
	// Run is the template of every run's Server options (token, allowed hosts, assets are also the
	// library's own); its Store is ignored.
	Run Options
	// Open opens a run's store; nil: store.Open, following the run while it is live.
	Open func(dir string, live bool) (Store, func(), error)
	// MaxOpen bounds how many runs are open at once (their streams loaded); zero: 8.
	MaxOpen int
	// MaxDepth bounds how deep under Root runs are looked for; zero: 4.
	MaxDepth int
	// LiveWithin says a run is live when a stream file changed this recently; zero: 2 min.
	LiveWithin time.Duration
	// FollowPoll is how often a live run's files are checked for growth; zero: 250 ms.
	FollowPoll time.Duration
	// CacheDir is where parsed columns of compacted hours are cached ("": no cache).
	CacheDir string
	// Budget is the memory budget every open run's hour blocks share (docs/operations.md "Memory"), shown at
	// /metrics; nil: each run unbounded, not shown.
	Budget *store.Budget
	// ScanEvery bounds how often the root is scanned again; zero: 1 s.
	ScanEvery time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Library serves every run under a root.
type Library struct {
	opts   LibraryOptions
	access access
	mux    *http.ServeMux

	scanMu   sync.Mutex
	scanned  time.Time
	runs     map[string]*libraryRun // by id, as of the last scan
	order    []string               // ids, newest start first
	scanCost scanStats

	openMu sync.Mutex
	lru    *list.List // of *openRun, front = most recent
	byID   map[string]*list.Element
	closed bool
}

// libraryRun is one run found under the root and its cached summary.
type libraryRun struct {
	id, dir string
	stamp   string // the file stamps its summary was made from
	summary RunSummary
}

// openRun is a run whose streams are loaded, with its own Server.
type openRun struct {
	id    string
	srv   *Server
	close func()
	refs  int // requests and sockets in flight
}

// scanStats is what the last scan read, for the runs listing (so "parses no run's streams" is checked).
type scanStats struct {
	Dirs      int `json:"dirs"`
	Summaries int `json:"summaries_made"`
}

// NewLibrary builds the library; Close closes every open run.
func NewLibrary(opts LibraryOptions) *Library {
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = 8
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 4
	}
	if opts.LiveWithin <= 0 {
		opts.LiveWithin = 2 * time.Minute
	}
	if opts.ScanEvery <= 0 {
		opts.ScanEvery = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Open == nil {
		follow := opts.FollowPoll
		opts.Open = func(dir string, live bool) (Store, func(), error) {
			st, err := store.Open(dir, live)
			if err != nil {
				return nil, nil, err
			}
			if opts.CacheDir != "" {
				st.SetCacheDir(opts.CacheDir)
			}
			if opts.Budget != nil {
				st.SetBudget(opts.Budget)
			}
			stop := make(chan struct{})
			if live {
				go st.Follow(cmpDuration(follow, 250*time.Millisecond), stop)
			}
			return st, func() { close(stop); st.Close() }, nil
		}
	}
	if opts.Run.Admission == nil { // every run's queries share one admission, as they share the budget
		opts.Run.Admission = NewAdmission(0)
	}
	l := &Library{
		opts: opts, access: newAccess(opts.Run.Token, opts.Run.AllowedHosts),
		runs: map[string]*libraryRun{}, lru: list.New(), byID: map[string]*list.Element{},
	}
	l.access.hide(opts.Root, "")
	l.access.hide(opts.CacheDir, "<cache>")
	l.access.hide(dumpCacheDir(opts.Run.DumpCacheDir), "<cache>")
	l.mux = http.NewServeMux()
	l.mux.HandleFunc("GET /api/v1/runs", opts.Run.Admission.wrap(apiHandler(l.hidePaths(l.listRuns))))
	l.mux.HandleFunc("GET /metrics", l.exposition)
	l.mux.HandleFunc("GET /api/", l.forward)
	if opts.Run.Assets != nil {
		l.mux.Handle("GET /", http.FileServerFS(opts.Run.Assets))
	}
	return l
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (l *Library) hidePaths(f apiFunc) apiFunc {
	return func(r *http.Request) (any, error) {
		data, err := f(r)
		if err != nil {
			err = l.access.redactErr(err)
		}
		return data, err
	}
}

// ServeHTTP checks the Host of every request and the token of every API and metrics request, then routes.
func (l *Library) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !l.access.hostAllowed(r.Host) {
		respondError(w, &apiError{errorForbidden, errors.New("this dashboard is not served under that host name: reach it by a loopback name, an IP address, or a name given to --allowed-hosts")})
		return
	}
	if (strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics") && !l.access.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="miles-dashboard"`)
		respondError(w, &apiError{errorUnauthorized, errors.New("this dashboard requires a token: add ?token=… to the page's URL, or send Authorization: Bearer …")})
		return
	}
	l.mux.ServeHTTP(w, r)
}

// forward answers an API request of one run (?run=<id>) with that run's Server.
func (l *Library) forward(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("run")
	if id == "" {
		respondError(w, badData(errors.New("this dashboard serves a library of runs: name the run with ?run=<id> (GET /api/v1/runs lists them)")))
		return
	}
	run := l.find(id)
	if run == nil {
		respondError(w, notFound(errors.New("no run "+quoteID(id)+" in the library")))
		return
	}
	o, err := l.acquire(run)
	if err != nil {
		respondError(w, l.access.redactErr(err))
		return
	}
	defer l.release(o)
	o.srv.ServeHTTP(w, r)
}

func quoteID(id string) string {
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return `"` + strings.ToValidUTF8(id, "?") + `"`
}

// find looks a run id up among the runs found (scanning again when the last scan is old).
func (l *Library) find(id string) *libraryRun {
	l.scan()
	l.scanMu.Lock()
	defer l.scanMu.Unlock()
	return l.runs[id]
}

// acquire opens a run (or finds it open) and holds it until release.
func (l *Library) acquire(run *libraryRun) (*openRun, error) {
	l.openMu.Lock()
	if l.closed {
		l.openMu.Unlock()
		return nil, errors.New("the dashboard is shutting down")
	}
	if el, ok := l.byID[run.id]; ok {
		o := el.Value.(*openRun)
		o.refs++
		l.lru.MoveToFront(el)
		l.openMu.Unlock()
		return o, nil
	}
	l.openMu.Unlock()
	// Opened outside the lock: loading a run's streams takes a while, and must not stall the other runs.
	st, closeStore, err := l.opts.Open(run.dir, run.summary.Live)
	if err != nil {
		return nil, err
	}
	opts := l.opts.Run
	opts.Store = st
	srv := New(opts)
	o := &openRun{id: run.id, srv: srv, close: func() { srv.Close(); closeStore() }, refs: 1}
	l.openMu.Lock()
	defer l.openMu.Unlock()
	if el, ok := l.byID[run.id]; ok || l.closed { // opened meanwhile by another request
		go o.close()
		if !ok {
			return nil, errors.New("the dashboard is shutting down")
		}
		other := el.Value.(*openRun)
		other.refs++
		return other, nil
	}
	l.byID[run.id] = l.lru.PushFront(o)
	l.evictLocked()
	return o, nil
}

func (l *Library) release(o *openRun) {
	l.openMu.Lock()
	defer l.openMu.Unlock()
	o.refs--
	l.evictLocked()
}

// evictLocked closes the least recently used idle runs past MaxOpen.
func (l *Library) evictLocked() {
	for el := l.lru.Back(); el != nil && l.lru.Len() > l.opts.MaxOpen; {
		prev := el.Prev()
		if o := el.Value.(*openRun); o.refs == 0 {
			l.lru.Remove(el)
			delete(l.byID, o.id)
			go o.close()
		}
		el = prev
	}
}

// openServer is the Server of a run that is open now, or nil.
func (l *Library) openServer(id string) *Server {
	l.openMu.Lock()
	defer l.openMu.Unlock()
	if el, ok := l.byID[id]; ok {
		return el.Value.(*openRun).srv
	}
	return nil
}

// Close closes every open run.
func (l *Library) Close() {
	l.openMu.Lock()
	l.closed = true
	var all []*openRun
	for el := l.lru.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*openRun))
	}
	l.lru.Init()
	l.byID = map[string]*list.Element{}
	l.openMu.Unlock()
	for _, o := range all {
		o.close()
	}
}

// scan finds the runs under the root, at most once per ScanEvery, and refreshes the summaries whose files
// changed.
func (l *Library) scan() {
	l.scanMu.Lock()
	defer l.scanMu.Unlock()
	now := l.opts.Now()
	if !l.scanned.IsZero() && now.Sub(l.scanned) < l.opts.ScanEvery {
		return
	}
	l.scanned = now
	found := map[string]string{} // id → dir
	stats := scanStats{}
	l.walk(l.opts.Root, 0, found, &stats)
	runs := make(map[string]*libraryRun, len(found))
	for id, dir := range found {
		run := l.runs[id]
		if run == nil {
			run = &libraryRun{id: id, dir: dir}
		}
		if stamp := summaryStamp(dir); stamp != run.stamp {
			run.stamp = stamp
			run.summary = summarize(id, dir)
			stats.Summaries++
		}
		run.summary.Live = run.summary.LastWrite > 0 &&
			now.Sub(time.Unix(0, int64(run.summary.LastWrite*1e9))) <= l.opts.LiveWithin
		runs[id] = run
	}
	l.runs, l.scanCost = runs, stats
	l.order = l.order[:0]
	for id := range runs {
		l.order = append(l.order, id)
	}
	sort.Slice(l.order, func(i, j int) bool {
		a, b := runs[l.order[i]].summary, runs[l.order[j]].summary
		if a.StartTS != b.StartTS {
			return a.StartTS > b.StartTS
		}
		return l.order[i] < l.order[j]
	})
}

// maxScanDirs bounds one scan, so a root holding a huge unrelated tree answers quickly all the same.
const maxScanDirs = 20000

// walk looks for runs below dir, without following links and without descending into a run.
func (l *Library) walk(dir string, depth int, found map[string]string, stats *scanStats) {
	if stats.Dirs >= maxScanDirs {
		return
	}
	stats.Dirs++
	if isRunDir(dir) {
		rel, err := filepath.Rel(l.opts.Root, dir)
		if err == nil {
			found[filepath.ToSlash(rel)] = dir
		}
		return
	}
	if depth >= l.opts.MaxDepth {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 || strings.HasPrefix(name, ".") {
			continue
		}
		l.walk(filepath.Join(dir, name), depth+1, found, stats)
	}
}

// isRunDir: a run directory holds dashboard/meta.json (otelcol-miles or the Python miles dashboard), the meta
// of a shard (dashboard/shards/<id>/meta.json), a v1 flat stream file, or miles dumps.
func isRunDir(dir string) bool {
	dash := filepath.Join(dir, runfiles.DashboardDir)
	if fileExists(filepath.Join(dash, runfiles.MetaFile)) {
		return true
	}
	if m, _ := filepath.Glob(filepath.Join(dash, "shards", "*", runfiles.MetaFile)); len(m) > 0 {
		return true
	}
	if m, _ := filepath.Glob(filepath.Join(dash, "*"+runfiles.PlainExt)); len(m) > 0 {
		return true
	}
	return dirExists(filepath.Join(dir, "rollout_data"))
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// runsList is the data of GET /api/v1/runs.
type runsList struct {
	// Library is true when the server serves a library (serve --root); a one-run server (serve --dir) answers
	// false with no runs, so a page learns which it talks to without an error answer.
	Library bool `json:"library"`
	// Runs are the runs found, newest start first.
	Runs []RunSummary `json:"runs"`
	// Scan is what the last scan of the root read.
	Scan scanStats `json:"scan"`
	// LiveWithinS is the live window: a run is live while a file of it changed this recently.
	LiveWithinS float64 `json:"live_within_s"`
}

func (l *Library) listRuns(*http.Request) (any, error) {
	l.scan()
	l.scanMu.Lock()
	out := runsList{Library: true, Runs: make([]RunSummary, 0, len(l.order)), Scan: l.scanCost, LiveWithinS: l.opts.LiveWithin.Seconds()}
	for _, id := range l.order {
		out.Runs = append(out.Runs, l.runs[id].summary)
	}
	l.scanMu.Unlock()
	for i := range out.Runs {
		if srv := l.openServer(out.Runs[i].ID); srv != nil {
			out.Runs[i].Advisory = advisoryState(srv)
		}
	}
	return out, nil
}

// advisoryState is the advisory of an open run, in short.
func advisoryState(srv *Server) *RunAdvisoryState {
	cfg, err := srv.advisoryConfig(nil)
	if err != nil {
		return nil
	}
	res := srv.advisoryResult(cfg, nil)
	st := &RunAdvisoryState{Firing: []RunAdvisoryFiring{}, Thresholds: res.Thresholds}
	for _, a := range res.Advisories {
		st.Firing = append(st.Firing, RunAdvisoryFiring{ID: a.ID, Rule: a.Rule, Level: a.Level})
		if st.Level == "" || levelOrder(a.Level) < levelOrder(st.Level) {
			st.Level = a.Level
		}
	}
	return st
}

// exposition of the library: every run is listed; the advisory is evaluated for the runs that are open and
// for every live run (opened for it, within MaxOpen), since a live run is what an alert is about.
func (l *Library) exposition(w http.ResponseWriter, _ *http.Request) {
	l.scan()
	l.scanMu.Lock()
	runs := make([]*libraryRun, 0, len(l.order))
	for _, id := range l.order {
		runs = append(runs, l.runs[id])
	}
	l.scanMu.Unlock()
	out := make([]runAdvice, 0, len(runs))
	opened := 0
	for _, run := range runs {
		ra := runAdvice{run: run.id, live: run.summary.Live, edge: run.summary.LastTS, step: run.summary.LatestStep}
		srv := l.openServer(run.id)
		if srv == nil && run.summary.Live && opened < l.opts.MaxOpen {
			if o, err := l.acquire(run); err == nil {
				opened++
				srv = o.srv
				defer l.release(o)
			}
		}
		if srv != nil {
			cfg, err := srv.advisoryConfig(nil)
			if err == nil {
				ra.res, ra.explored = srv.advisoryResult(cfg, nil), true
				ra.goodput = srv.goodputTotal()
			}
			ra.settled = srv.settledSteps()
		}
		out = append(out, ra)
	}
	writeExposition(w, out, l.opts.Budget)
}
