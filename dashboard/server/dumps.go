package server

// Dump endpoints (issue 9; docs/dashboard-api.md "Dumps (issue 9)"): the step page (L1) and sample page (L2)
// read miles dump directories through dashboard/dumps. Step ids and sample indexes are parsed as integers and
// every file name is built by the dumps package, so no URL reaches outside the run directory. State lives per
// server in dumpStates (server.go is not ours to extend).

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
)

type dumpState struct {
	mu sync.Mutex
	rd *dumps.Reader
}

var dumpStates sync.Map // *Server → *dumpState

func (s *Server) dumpState() *dumpState {
	if d, ok := dumpStates.Load(s); ok {
		return d.(*dumpState)
	}
	d, _ := dumpStates.LoadOrStore(s, &dumpState{})
	return d.(*dumpState)
}

// SetDumps points the dump endpoints at a run directory; cacheDir holds derived data (step summaries) and
// defaults to the user cache directory, never the run directory.
func (s *Server) SetDumps(runDir, cacheDir string) {
	if cacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(d, "otelcol-miles", "dumps")
		}
	}
	d := s.dumpState()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rd != nil {
		d.rd.Close()
	}
	d.rd = dumps.Open(runDir, dumps.Options{CacheDir: cacheDir})
}

// CloseDumps closes the dump reader's open files and forgets this server's dump state (call it with Close).
func (s *Server) CloseDumps() {
	if d, ok := dumpStates.LoadAndDelete(s); ok {
		st := d.(*dumpState)
		st.mu.Lock()
		if st.rd != nil {
			st.rd.Close()
		}
		st.mu.Unlock()
	}
}

func (s *Server) dumpReader() (*dumps.Reader, error) {
	d := s.dumpState()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rd == nil {
		return nil, &apiError{http.StatusNotFound, "not_found", "the dump reader is not configured on this server"}
	}
	return d.rd, nil
}

// registerDumps adds the issue 9 routes. The run directory comes from SetDumps, or from the store when it
// tells its directory.
func (s *Server) registerDumps() {
	if d, ok := any(s.st).(interface{ Dir() string }); ok && s.st != nil {
		s.SetDumps(d.Dir(), "")
	}
	s.mux.HandleFunc("GET /api/v1/dumps/steps", s.wrap(s.dumpSteps))
	s.mux.HandleFunc("GET /api/v1/dumps/steps/{id}", s.wrap(s.dumpStep))
	s.mux.HandleFunc("GET /api/v1/dumps/steps/{id}/groups", s.wrap(s.dumpGroups))
	s.mux.HandleFunc("GET /api/v1/dumps/steps/{id}/samples", s.dumpSamples)
	s.mux.HandleFunc("GET /api/v1/dumps/steps/{id}/samples/{idx}", s.wrap(s.dumpSample))
	s.mux.HandleFunc("GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens", s.wrap(s.dumpTokens))
}

// dumpErr maps reader errors to the API's typed errors.
func dumpErr(err error) error {
	var (
		nf *dumps.NotFoundError
		ue *dumps.UnavailableError
		fc *dumps.FileCorruptError
		ce *dumps.CorruptError
		fe *dumps.ForbiddenError
		re *dumps.RangeError
		ae *apiError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case errors.As(err, &nf), errors.Is(err, fs.ErrNotExist):
		return &apiError{http.StatusNotFound, "not_found", err.Error()}
	case errors.As(err, &ue):
		return &apiError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	case errors.As(err, &fe):
		return &apiError{http.StatusInternalServerError, "refused", err.Error()}
	case errors.As(err, &fc), errors.As(err, &ce):
		return &apiError{http.StatusInternalServerError, "corrupt", err.Error()}
	case errors.As(err, &re):
		return badData(err)
	}
	return err
}

func stepKey(r *http.Request) (dumps.StepKey, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 0 {
		return dumps.StepKey{}, badData(errors.New("step id must be a non-negative integer"))
	}
	k := dumps.StepKey{ID: id}
	switch r.URL.Query().Get("eval") {
	case "", "0", "false":
	case "1", "true":
		k.Eval = true
	default:
		return k, badData(errors.New("eval must be 0 or 1"))
	}
	return k, nil
}

func (s *Server) acquireStep(r *http.Request) (*dumps.Step, func(), error) {
	rd, err := s.dumpReader()
	if err != nil {
		return nil, nil, err
	}
	k, err := stepKey(r)
	if err != nil {
		return nil, nil, err
	}
	st, release, err := rd.Acquire(k)
	if err != nil {
		return nil, nil, dumpErr(err)
	}
	return st, release, nil
}

func sampleIndex(r *http.Request) (int64, error) {
	idx, err := strconv.ParseInt(r.PathValue("idx"), 10, 64)
	if err != nil {
		return 0, badData(errors.New("sample index must be an integer"))
	}
	return idx, nil
}

type stepEntry struct {
	ID         int64        `json:"id"`
	Eval       bool         `json:"eval"`
	Size       int64        `json:"size"`
	ModTime    float64      `json:"mtime"`
	TrainRanks int          `json:"train_ranks"`
	Sidecar    bool         `json:"sidecar"`
	Columns    bool         `json:"columns"`
	OtherKind  bool         `json:"other_kind"` // the eval (train) dump of the same id exists
	Tiles      *dumps.Tiles `json:"tiles"`      // null until the step's summary was computed once
}

func (s *Server) dumpSteps(r *http.Request) (any, error) {
	rd, err := s.dumpReader()
	if err != nil {
		return nil, err
	}
	files, err := rd.List()
	if err != nil {
		return nil, dumpErr(err)
	}
	have := map[dumps.StepKey]bool{}
	for _, f := range files {
		have[f.Key] = true
	}
	out := make([]stepEntry, 0, len(files))
	for _, f := range files {
		e := stepEntry{ID: f.Key.ID, Eval: f.Key.Eval, Size: f.Size, ModTime: float64(f.ModTime.UnixNano()) / 1e9,
			TrainRanks: f.TrainRanks, Sidecar: f.Sidecar, Columns: f.Columns,
			OtherKind: have[dumps.StepKey{ID: f.Key.ID, Eval: !f.Key.Eval}]}
		if sum := rd.ListedSummary(f); sum != nil {
			t := sum.Tiles
			e.Tiles = &t
		}
		out = append(out, e)
	}
	tok, terr := rd.Tokenizer()
	tokState := map[string]any{"present": tok != nil}
	if terr != nil {
		tokState["error"] = terr.Error()
	}
	return map[string]any{"steps": out, "tokenizer": tokState}, nil
}

func (s *Server) dumpStep(r *http.Request) (any, error) {
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, dumpErr(err)
	}
	rd, _ := s.dumpReader()
	files, _ := rd.List()
	var prev, next *int64
	other := false
	for _, f := range files {
		if f.Key.Eval != st.Key.Eval {
			if f.Key.ID == st.Key.ID {
				other = true
			}
			continue
		}
		id := f.Key.ID
		if id < st.Key.ID && (prev == nil || id > *prev) {
			prev = &id
		}
		if id > st.Key.ID && (next == nil || id < *next) {
			next = &id
		}
	}
	return map[string]any{"id": st.Key.ID, "eval": st.Key.Eval, "samples": len(st.Samples),
		"train_ranks": st.TrainRanks(), "columns": st.HasColumns(), "sidecar": st.HasSidecar(),
		"tiles": sum.Tiles, "prev": prev, "next": next, "other_kind": other}, nil
}

// columnar turns a slice of structs into {"columns": [json names], "data": {name: [values]}}.
func columnar(rows any, names []string) map[string]any {
	v := reflect.ValueOf(rows)
	t := v.Type().Elem()
	all := []string{}
	field := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		all = append(all, tag)
		field[tag] = i
	}
	if names == nil {
		names = all
	}
	data := map[string]any{}
	for _, n := range names {
		col := make([]any, v.Len())
		for i := range col {
			col[i] = v.Index(i).Field(field[n]).Interface()
		}
		data[n] = col
	}
	return map[string]any{"columns": names, "data": data}
}

func rowFieldNames() []string {
	t := reflect.TypeOf(dumps.Row{})
	out := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if tag := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]; tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

func (s *Server) dumpGroups(r *http.Request) (any, error) {
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, dumpErr(err)
	}
	return columnar(sum.Groups, nil), nil
}

// sortValue orders a row field: numbers and strings compare, nulls last whatever the direction.
func sortValue(v reflect.Value) (float64, string, bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, "", false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Float64, reflect.Float32:
		return v.Float(), "", true
	case reflect.Int, reflect.Int64, reflect.Int32:
		return float64(v.Int()), "", true
	case reflect.Bool:
		if v.Bool() {
			return 1, "", true
		}
		return 0, "", true
	case reflect.String:
		return math.NaN(), v.String(), true
	}
	return 0, "", false
}

type sampleQuery struct {
	sort       string
	desc       bool
	status     map[string]bool
	rewardMin  *float64
	rewardMax  *float64
	group      *int64
	text       string
	zeroStd    bool
	removed    *bool
	truncated  *bool
	offset     int
	limit      int
	columns    []string
	csv        bool
	limitGiven bool
}

func parseSampleQuery(r *http.Request) (*sampleQuery, error) {
	q := r.URL.Query()
	sq := &sampleQuery{sort: q.Get("sort"), text: strings.ToLower(q.Get("q")), csv: q.Get("format") == "csv"}
	if f := q.Get("format"); f != "" && f != "csv" && f != "json" {
		return nil, badData(errors.New("format must be json or csv"))
	}
	names := rowFieldNames()
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	if sq.sort == "" {
		sq.sort = "sample_index"
	}
	if !known[sq.sort] {
		return nil, badData(fmt.Errorf("unknown sort column %q", sq.sort))
	}
	switch q.Get("desc") {
	case "", "0", "false":
	case "1", "true":
		sq.desc = true
	default:
		return nil, badData(errors.New("desc must be 0 or 1"))
	}
	if st := q.Get("status"); st != "" {
		sq.status = map[string]bool{}
		for _, x := range strings.Split(st, ",") {
			sq.status[x] = true
		}
	}
	for _, p := range []struct {
		name string
		dst  **float64
	}{{"reward_min", &sq.rewardMin}, {"reward_max", &sq.rewardMax}} {
		f, err := optFloat(r, p.name)
		if err != nil {
			return nil, badData(fmt.Errorf("%s must be a number", p.name))
		}
		*p.dst = f
	}
	if g := q.Get("group"); g != "" {
		x, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, badData(errors.New("group must be an integer"))
		}
		sq.group = &x
	}
	for _, p := range []struct {
		name string
		dst  **bool
	}{{"removed", &sq.removed}, {"truncated", &sq.truncated}} {
		switch q.Get(p.name) {
		case "":
		case "0", "false":
			b := false
			*p.dst = &b
		case "1", "true":
			b := true
			*p.dst = &b
		default:
			return nil, badData(fmt.Errorf("%s must be 0 or 1", p.name))
		}
	}
	sq.zeroStd = q.Get("zero_std") == "1" || q.Get("zero_std") == "true"
	var err error
	if sq.offset, err = intParam(r, "offset", 0, 0, math.MaxInt32); err != nil {
		return nil, err
	}
	sq.limitGiven = q.Get("limit") != ""
	if sq.limit, err = intParam(r, "limit", 200, 1, 100000); err != nil {
		return nil, err
	}
	if c := q.Get("columns"); c != "" {
		for _, x := range strings.Split(c, ",") {
			if !known[x] {
				return nil, badData(fmt.Errorf("unknown column %q", x))
			}
			sq.columns = append(sq.columns, x)
		}
	}
	return sq, nil
}

// dumpSamples answers the samples table: filter, sort, page; format=csv exports every matching row (or the
// page when offset/limit are given).
func (s *Server) dumpSamples(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { s.wrap(func(*http.Request) (any, error) { return nil, err })(w, r) }
	sq, err := parseSampleQuery(r)
	if err != nil {
		fail(err)
		return
	}
	st, release, err := s.acquireStep(r)
	if err != nil {
		fail(err)
		return
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		fail(dumpErr(err))
		return
	}
	zero := map[int64]bool{}
	for _, g := range sum.Groups {
		zero[g.GroupIndex] = g.ZeroStd
	}
	rows := make([]dumps.Row, 0, len(sum.Rows))
	for _, row := range sum.Rows {
		rew := row.RawReward
		if rew == nil {
			rew = row.Reward
		}
		switch {
		case sq.status != nil && !sq.status[row.Status]:
			continue
		case sq.rewardMin != nil && (rew == nil || *rew < *sq.rewardMin):
			continue
		case sq.rewardMax != nil && (rew == nil || *rew > *sq.rewardMax):
			continue
		case sq.group != nil && row.GroupIndex != *sq.group:
			continue
		case sq.zeroStd && !zero[row.GroupIndex]:
			continue
		case sq.removed != nil && row.RemoveSample != *sq.removed:
			continue
		case sq.truncated != nil && row.Truncated != *sq.truncated:
			continue
		}
		if sq.text != "" {
			smp, err := st.Sample(row.SampleIndex)
			if err != nil {
				fail(dumpErr(err))
				return
			}
			prompt, resp, err := st.Text(smp)
			if err != nil {
				fail(dumpErr(err))
				return
			}
			hay := strings.ToLower(resp + "\n" + prompt + "\n" + smp.Label)
			if !strings.Contains(hay, sq.text) {
				continue
			}
		}
		rows = append(rows, row)
	}
	fi := -1
	rt := reflect.TypeOf(dumps.Row{})
	for i := 0; i < rt.NumField(); i++ {
		if strings.Split(rt.Field(i).Tag.Get("json"), ",")[0] == sq.sort {
			fi = i
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, as, aok := sortValue(reflect.ValueOf(rows[i]).Field(fi))
		b, bs, bok := sortValue(reflect.ValueOf(rows[j]).Field(fi))
		if aok != bok {
			return aok // nulls last
		}
		if !aok {
			return rows[i].SampleIndex < rows[j].SampleIndex
		}
		var less, eq bool
		if math.IsNaN(a) || math.IsNaN(b) {
			less, eq = as < bs, as == bs
		} else {
			less, eq = a < b, a == b
		}
		if eq {
			return rows[i].SampleIndex < rows[j].SampleIndex
		}
		if sq.desc {
			return !less
		}
		return less
	})
	matched := len(rows)
	page := rows
	if !sq.csv || sq.limitGiven || sq.offset > 0 {
		lo := min(sq.offset, len(rows))
		hi := min(lo+sq.limit, len(rows))
		page = rows[lo:hi]
	}
	if sq.csv {
		names := sq.columns
		if names == nil {
			names = rowFieldNames()
		}
		col := columnar(page, names)["data"].(map[string]any)
		var buf bytes.Buffer
		cw := csv.NewWriter(&buf)
		_ = cw.Write(names)
		for i := range page {
			rec := make([]string, len(names))
			for k, n := range names {
				rec[k] = csvCell(col[n].([]any)[i])
			}
			_ = cw.Write(rec)
		}
		cw.Flush()
		name := fmt.Sprintf("step_%s_samples.csv", st.Key)
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
		return
	}
	out := columnar(page, sq.columns)
	out["step"], out["eval"] = st.Key.ID, st.Key.Eval
	out["total"], out["matched"], out["offset"], out["limit"] = len(sum.Rows), matched, sq.offset, sq.limit
	out["sort"], out["desc"] = sq.sort, sq.desc
	s.wrap(func(*http.Request) (any, error) { return out, nil })(w, r)
}

func csvCell(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Float64:
		return strconv.FormatFloat(rv.Float(), 'g', -1, 64)
	case reflect.String:
		return rv.String()
	}
	b, _ := json.Marshal(rv.Interface())
	return string(b)
}

func (s *Server) dumpSample(r *http.Request) (any, error) {
	idx, err := sampleIndex(r)
	if err != nil {
		return nil, err
	}
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	smp, err := st.Sample(idx)
	if err != nil {
		return nil, dumpErr(err)
	}
	row, err := st.RowOf(smp)
	if err != nil {
		return nil, dumpErr(err)
	}
	g := st.Group(smp.Group)
	pos := sort.Search(len(g), func(i int) bool { return g[i] >= idx })
	group := map[string]any{"group_index": smp.Group, "samples": g, "position": pos, "prev": nil, "next": nil,
		"zero_std": st.ZeroStdGroup(smp.Group)}
	if pos > 0 {
		group["prev"] = g[pos-1]
	}
	if pos+1 < len(g) {
		group["next"] = g[pos+1]
	}
	out := map[string]any{"step": st.Key.ID, "eval": st.Key.Eval, "sample": row, "group": group,
		"weight_versions": nz(smp.WeightVersions), "label": smp.Label, "conversation": nil}
	conv, err := st.Conversation(idx)
	switch {
	case err != nil:
		out["conversation_note"] = "trajectory sidecar unreadable: " + err.Error()
	case conv != nil:
		out["conversation"] = conv
	case !st.HasSidecar():
		out["conversation_note"] = "no trajectory sidecar for this step: tokens only"
	default:
		out["conversation_note"] = "the trajectory sidecar has no messages for this sample: tokens only"
	}
	if conv == nil {
		prompt, resp, err := st.Text(smp)
		if err != nil {
			return nil, dumpErr(err)
		}
		out["prompt_text"], out["response_text"] = prompt, resp
	}
	return out, nil
}

func (s *Server) dumpTokens(r *http.Request) (any, error) {
	idx, err := sampleIndex(r)
	if err != nil {
		return nil, err
	}
	from, err := intParam(r, "from", 0, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	to, err := intParam(r, "to", -1, -1, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	buckets, err := intParam(r, "buckets", 0, 0, 8192)
	if err != nil {
		return nil, err
	}
	var fields []string
	if f := r.URL.Query().Get("fields"); f != "" {
		known := map[string]bool{}
		for _, k := range dumps.TokenFields {
			known[k] = true
		}
		for _, x := range strings.Split(f, ",") {
			if !known[x] {
				return nil, badData(fmt.Errorf("unknown field %q (fields: %s)", x, strings.Join(dumps.TokenFields, ",")))
			}
			fields = append(fields, x)
		}
	}
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	w, err := st.Tokens(idx, from, to, fields, buckets)
	if err != nil {
		return nil, dumpErr(err)
	}
	return w, nil
}
