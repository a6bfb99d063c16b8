package server

// The dump endpoints: the step page (L1) and the sample page (L2) read miles dump directories through
// dashboard/dumps (docs/dashboard-api.md "Dumps"). Step ids and sample indexes are parsed as integers and every
// file name is built by the dumps package, so no URL reaches outside the run directory.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
)

// reader is the dump reader, or not_found on a server without one.
func (s *Server) reader() (dumpReader, error) {
	if s.dumps == nil {
		return nil, notFound(errors.New("the dump reader is not configured on this server"))
	}
	return s.dumps, nil
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

// acquireStep opens the step of the path (its files stay open until release).
func (s *Server) acquireStep(r *http.Request) (*dumps.Step, func(), error) {
	rd, err := s.reader()
	if err != nil {
		return nil, nil, err
	}
	k, err := stepKey(r)
	if err != nil {
		return nil, nil, err
	}
	return rd.Acquire(k)
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

type dumpStepList struct {
	Steps     []stepEntry    `json:"steps"`
	Tokenizer tokenizerState `json:"tokenizer"`
}

type tokenizerState struct {
	Present bool   `json:"present"`
	Error   string `json:"error,omitempty"`
}

func (s *Server) dumpSteps(*http.Request) (any, error) {
	rd, err := s.reader()
	if err != nil {
		return nil, err
	}
	files, err := rd.List()
	if err != nil {
		return nil, err
	}
	have := map[dumps.StepKey]bool{}
	for _, f := range files {
		have[f.Key] = true
	}
	out := make([]stepEntry, 0, len(files))
	for _, f := range files {
		e := stepEntry{
			ID: f.Key.ID, Eval: f.Key.Eval, Size: f.Size, ModTime: float64(f.ModTime.UnixNano()) / 1e9,
			TrainRanks: f.TrainRanks, Sidecar: f.Sidecar, Columns: f.Columns,
			OtherKind: have[dumps.StepKey{ID: f.Key.ID, Eval: !f.Key.Eval}],
		}
		if sum := rd.ListedSummary(f); sum != nil {
			t := sum.Tiles
			e.Tiles = &t
		}
		out = append(out, e)
	}
	tok, terr := rd.Tokenizer()
	ts := tokenizerState{Present: tok != nil}
	if terr != nil {
		ts.Error = terr.Error()
	}
	return dumpStepList{Steps: out, Tokenizer: ts}, nil
}

type dumpStepPage struct {
	ID         int64       `json:"id"`
	Eval       bool        `json:"eval"`
	Samples    int         `json:"samples"`
	TrainRanks int         `json:"train_ranks"`
	Columns    bool        `json:"columns"`
	Sidecar    bool        `json:"sidecar"`
	Tiles      dumps.Tiles `json:"tiles"`
	Prev       *int64      `json:"prev"` // the neighboring steps of the same kind
	Next       *int64      `json:"next"`
	OtherKind  bool        `json:"other_kind"`
}

func (s *Server) dumpStep(r *http.Request) (any, error) {
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, err
	}
	files, _ := s.dumps.List()
	p := dumpStepPage{
		ID: st.Key.ID, Eval: st.Key.Eval, Samples: len(st.Samples), TrainRanks: st.TrainRanks(),
		Columns: st.HasColumns(), Sidecar: st.HasSidecar(), Tiles: sum.Tiles,
	}
	for _, f := range files {
		if f.Key.Eval != st.Key.Eval {
			if f.Key.ID == st.Key.ID {
				p.OtherKind = true
			}
			continue
		}
		id := f.Key.ID
		if id < st.Key.ID && (p.Prev == nil || id > *p.Prev) {
			p.Prev = &id
		}
		if id > st.Key.ID && (p.Next == nil || id < *p.Next) {
			p.Next = &id
		}
	}
	return p, nil
}

// columnTable is a table by columns: the column names (json names of a row struct) and each column's values.
type columnTable struct {
	Columns []string         `json:"columns"`
	Data    map[string][]any `json:"data"`
}

// columnar turns a slice of structs into a columnTable of the named columns (nil: all).
func columnar(rows any, names []string) columnTable {
	v := reflect.ValueOf(rows)
	t := v.Type().Elem()
	all := []string{}
	field := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		all = append(all, tag)
		field[tag] = i
	}
	if names == nil {
		names = all
	}
	data := map[string][]any{}
	for _, n := range names {
		col := make([]any, v.Len())
		for i := range col {
			col[i] = v.Index(i).Field(field[n]).Interface()
		}
		data[n] = col
	}
	return columnTable{Columns: names, Data: data}
}

func rowFieldNames() []string {
	t := reflect.TypeFor[dumps.Row]()
	out := make([]string, 0, t.NumField())
	for field := range t.Fields() {
		if tag, _, _ := strings.Cut(field.Tag.Get("json"), ","); tag != "" && tag != "-" {
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
		return nil, err
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
		for x := range strings.SplitSeq(st, ",") {
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
		for x := range strings.SplitSeq(c, ",") {
			if !known[x] {
				return nil, badData(fmt.Errorf("unknown column %q", x))
			}
			sq.columns = append(sq.columns, x)
		}
	}
	return sq, nil
}

// samplePage is one page of the samples table.
type samplePage struct {
	columnTable
	Step    int64  `json:"step"`
	Eval    bool   `json:"eval"`
	Total   int    `json:"total"`
	Matched int    `json:"matched"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Sort    string `json:"sort"`
	Desc    bool   `json:"desc"`
}

// dumpSamples answers the samples table: filter, sort, page; format=csv exports every matching row (or the
// page when offset/limit are given).
func (s *Server) dumpSamples(r *http.Request) (any, error) {
	sq, err := parseSampleQuery(r)
	if err != nil {
		return nil, err
	}
	st, release, err := s.acquireStep(r)
	if err != nil {
		return nil, err
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, err
	}
	rows, err := filterSamples(st, sum, sq)
	if err != nil {
		return nil, err
	}
	sortSamples(rows, sq.sort, sq.desc)
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
		col := columnar(page, names).Data
		recs := make([][]string, len(page))
		for i := range page {
			rec := make([]string, len(names))
			for k, n := range names {
				rec[k] = csvCell(col[n][i])
			}
			recs[i] = rec
		}
		return csvTable{name: fmt.Sprintf("step_%s_samples.csv", st.Key), header: names, rows: recs}, nil
	}
	return samplePage{
		columnTable: columnar(page, sq.columns), Step: st.Key.ID, Eval: st.Key.Eval,
		Total: len(sum.Rows), Matched: len(rows), Offset: sq.offset, Limit: sq.limit, Sort: sq.sort, Desc: sq.desc,
	}, nil
}

// filterSamples keeps the rows the query's filters let through.
func filterSamples(st *dumps.Step, sum *dumps.Summary, sq *sampleQuery) ([]dumps.Row, error) {
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
				return nil, err
			}
			prompt, resp, err := st.Text(smp)
			if err != nil {
				return nil, err
			}
			hay := strings.ToLower(resp + "\n" + prompt + "\n" + smp.Label)
			if !strings.Contains(hay, sq.text) {
				continue
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// sortSamples orders rows by the column named by, nulls last, ties by sample index.
func sortSamples(rows []dumps.Row, by string, desc bool) {
	fi := -1
	rt := reflect.TypeFor[dumps.Row]()
	for i := 0; i < rt.NumField(); i++ {
		if strings.Split(rt.Field(i).Tag.Get("json"), ",")[0] == by {
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
		if desc {
			return !less
		}
		return less
	})
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

type samplePageDetail struct {
	Step             int64               `json:"step"`
	Eval             bool                `json:"eval"`
	Sample           dumps.Row           `json:"sample"`
	Group            sampleGroup         `json:"group"`
	WeightVersions   []string            `json:"weight_versions"`
	Label            string              `json:"label"`
	Conversation     *dumps.Conversation `json:"conversation"`
	ConversationNote string              `json:"conversation_note,omitempty"` // why there is no conversation
	PromptText       *string             `json:"prompt_text,omitempty"`       // without a conversation only
	ResponseText     *string             `json:"response_text,omitempty"`
}

// sampleGroup places the sample in its group: the group's samples and the neighbors of this one.
type sampleGroup struct {
	GroupIndex int64   `json:"group_index"`
	Samples    []int64 `json:"samples"`
	Position   int     `json:"position"`
	Prev       *int64  `json:"prev"`
	Next       *int64  `json:"next"`
	ZeroStd    bool    `json:"zero_std"`
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
		return nil, err
	}
	row, err := st.RowOf(smp)
	if err != nil {
		return nil, err
	}
	g := st.Group(smp.Group)
	pos := sort.Search(len(g), func(i int) bool { return g[i] >= idx })
	group := sampleGroup{GroupIndex: smp.Group, Samples: g, Position: pos, ZeroStd: st.ZeroStdGroup(smp.Group)}
	if pos > 0 {
		group.Prev = &g[pos-1]
	}
	if pos+1 < len(g) {
		group.Next = &g[pos+1]
	}
	out := samplePageDetail{
		Step: st.Key.ID, Eval: st.Key.Eval, Sample: row, Group: group,
		WeightVersions: nz(smp.WeightVersions), Label: smp.Label,
	}
	conv, err := st.Conversation(idx)
	switch {
	case err != nil:
		out.ConversationNote = "trajectory sidecar unreadable: " + err.Error()
	case conv != nil:
		out.Conversation = conv
	case !st.HasSidecar():
		out.ConversationNote = "no trajectory sidecar for this step: tokens only"
	default:
		out.ConversationNote = "the trajectory sidecar has no messages for this sample: tokens only"
	}
	if conv == nil {
		prompt, resp, err := st.Text(smp)
		if err != nil {
			return nil, err
		}
		out.PromptText, out.ResponseText = &prompt, &resp
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
		for x := range strings.SplitSeq(f, ",") {
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
	return st.Tokens(idx, from, to, fields, buckets)
}
