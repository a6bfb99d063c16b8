package dumps

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// columnsFile is the per-token parquet mirror dashboard_columns/rollout_[eval_]<id>.parquet written by miles:
// one row per sample (sample_index, response_length, total_length, tokens, loss_mask, rollout_log_probs) in
// row groups of 8. A point read opens only the row group whose sample_index statistics cover the sample.
type columnsFile struct {
	path    string
	shown   string
	f       *os.File
	pf      *parquet.File
	cols    map[string]int // top-level name → leaf column index
	size    int64
	modTime time.Time
	mu      sync.Mutex // one reader of the parquet file at a time
}

// openColumns opens the mirror at path, a file of the run in root: a link out of the run is not followed
// (runfiles.ErrOutsideRun).
func openColumns(root, path, shown string, settle time.Duration) (*columnsFile, error) {
	f, err := runfiles.Open(root, path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, fi.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		f.Close()
		return nil, classify(shown, fi.ModTime(), settle, fmt.Errorf("not a complete parquet file (%w)", err))
	}
	c := &columnsFile{
		path: path, shown: shown, f: f, pf: pf, cols: map[string]int{}, size: fi.Size(),
		modTime: fi.ModTime(),
	}
	for i, p := range pf.Schema().Columns() {
		if len(p) > 0 {
			if _, dup := c.cols[p[0]]; !dup {
				c.cols[p[0]] = i
			}
		}
	}
	if _, ok := c.cols["sample_index"]; !ok {
		f.Close()
		return nil, &FileCorruptError{Path: shown, Err: errors.New("no sample_index column")}
	}
	return c, nil
}

func (c *columnsFile) close() { c.f.Close() }

// columnsRow is one sample's per-token lists from the mirror (nil when a column is absent).
type columnsRow struct {
	tokens   []int64
	lossMask []int8
	lp       []float32
}

// read returns the row of sample index si, or nil when the mirror does not hold it.
func (c *columnsFile) read(si int64) (*columnsRow, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sic := c.cols["sample_index"]
	md := c.pf.Metadata()
	for gi, rg := range c.pf.RowGroups() {
		if gi < len(md.RowGroups) && sic < len(md.RowGroups[gi].Columns) {
			st := md.RowGroups[gi].Columns[sic].MetaData.Statistics
			lo, hi := st.MinValue, st.MaxValue
			if len(lo) == 4 && len(hi) == 4 {
				if si < signed(uint64(binary.LittleEndian.Uint32(lo)), 32) || si > signed(uint64(binary.LittleEndian.Uint32(hi)), 32) {
					continue
				}
			}
		}
		chunks := rg.ColumnChunks()
		idx, err := leafValues(chunks[sic], -1)
		if err != nil {
			return nil, c.wrap(err)
		}
		row := -1
		for i, v := range idx {
			if len(v) == 1 && v[0].Int64() == si {
				row = i
				break
			}
		}
		if row < 0 {
			continue
		}
		out := &columnsRow{}
		if ci, ok := c.cols["tokens"]; ok {
			vals, err := leafValues(chunks[ci], row)
			if err != nil {
				return nil, c.wrap(err)
			}
			out.tokens = make([]int64, 0, len(vals[0]))
			for _, v := range vals[0] {
				if !v.IsNull() {
					out.tokens = append(out.tokens, v.Int64())
				}
			}
		}
		if ci, ok := c.cols["loss_mask"]; ok {
			vals, err := leafValues(chunks[ci], row)
			if err != nil {
				return nil, c.wrap(err)
			}
			out.lossMask = make([]int8, 0, len(vals[0]))
			for _, v := range vals[0] {
				if v.IsNull() {
					continue
				}
				m := v.Int64()
				if m < math.MinInt8 || m > math.MaxInt8 {
					return nil, c.wrap(fmt.Errorf("loss_mask value %d out of range", m))
				}
				out.lossMask = append(out.lossMask, int8(m))
			}
		}
		if ci, ok := c.cols["rollout_log_probs"]; ok {
			vals, err := leafValues(chunks[ci], row)
			if err != nil {
				return nil, c.wrap(err)
			}
			out.lp = make([]float32, 0, len(vals[0]))
			for _, v := range vals[0] {
				if !v.IsNull() {
					out.lp = append(out.lp, v.Float())
				}
			}
		}
		return out, nil
	}
	return nil, nil
}

func (c *columnsFile) wrap(err error) error { return &FileCorruptError{Path: c.shown, Err: err} }

// leafValues reads a column chunk and splits its values into rows (repetition level 0 starts a row). With
// only ≥ 0 it returns just that row (as the single element) and stops reading once past it.
func leafValues(ch parquet.ColumnChunk, only int) ([][]parquet.Value, error) {
	pages := ch.Pages()
	defer pages.Close()
	var rows [][]parquet.Value
	row := -1
	buf := make([]parquet.Value, 1024)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		vr := p.Values()
		for {
			n, err := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				if v.RepetitionLevel() == 0 {
					row++
					if only < 0 || row == only {
						rows = append(rows, nil)
					}
				}
				if only >= 0 && row > only {
					parquet.Release(p)
					return rows, nil
				}
				if only < 0 || row == only {
					if !v.IsNull() || v.DefinitionLevel() > 0 {
						rows[len(rows)-1] = append(rows[len(rows)-1], v.Clone())
					}
				}
			}
			if errors.Is(err, io.EOF) || n == 0 {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, err
			}
		}
		parquet.Release(p)
	}
	if only >= 0 && len(rows) == 0 {
		return nil, fmt.Errorf("row %d missing from column chunk", only)
	}
	return rows, nil
}
