package dumps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

func TestSplitMarkup(t *testing.T) {
	for name, tc := range map[string]struct {
		in    string
		types []string
		calls int
	}{
		"plain":             {"The answer is 42.<|im_end|>", []string{"text"}, 0},
		"think then answer": {"<think>17+25</think>The answer is 42.", []string{"thinking", "text"}, 0},
		"unclosed think":    {"<think>still thinking when truncated", []string{"thinking"}, 0},
		"tool call":         {`Let me compute.<tool_call>{"name": "calc", "arguments": {"x": 1}}</tool_call>`, []string{"text", "tool_call"}, 1},
		"bad tool json":     {`<tool_call>not json</tool_call>`, []string{"tool_call"}, 1},
		"tool in thinking":  {`<think>maybe <tool_call>{"name":"a"}</tool_call></think>done`, []string{"thinking", "text"}, 0},
		"unknown markup":    {"<answer>42</answer>", []string{"text"}, 0},
	} {
		blocks, calls := splitMarkup(tc.in)
		var types []string
		for _, b := range blocks {
			types = append(types, b.Type)
		}
		if join(types) != join(tc.types) || calls != tc.calls {
			t.Errorf("%s: blocks %v calls %d, want %v %d", name, types, calls, tc.types, tc.calls)
		}
		if name == "unknown markup" && blocks[0].Text != "<answer>42</answer>" {
			t.Errorf("unknown markup not verbatim: %q", blocks[0].Text)
		}
		if name == "bad tool json" && (*blocks[0].Valid || blocks[0].Arguments != "not json") {
			t.Errorf("bad tool json: %+v", blocks[0])
		}
		if name == "tool call" && blocks[1].Arguments != "{\n  \"x\": 1\n}" {
			t.Errorf("arguments not pretty: %q", blocks[1].Arguments)
		}
	}
}

func TestSidecarAsWritten(t *testing.T) {
	exp := loadExpected(t)
	sc, err := openSidecar(fixtureRun, fixtureRun+"/trajectory/1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	side := exp.Steps["1"].Sidecar
	if len(sc.offsets) != len(side) || len(side) == 0 {
		t.Fatalf("%d rows, want %d", len(sc.offsets), len(side))
	}
	for k, raw := range side {
		var want struct {
			SampleIndex int64             `json:"sample_index"`
			Messages    []json.RawMessage `json:"messages"`
		}
		_ = json.Unmarshal(raw, &want)
		row, err := sc.row(want.SampleIndex)
		if err != nil || row == nil {
			t.Fatalf("sample %s: %v", k, err)
		}
		c, err := normalizeConversation(want.SampleIndex, row)
		if err != nil || len(c.Messages) != len(want.Messages) {
			t.Fatalf("sample %s: %v messages %d want %d", k, err, len(c.Messages), len(want.Messages))
		}
	}
	// a trailing partial line (still being written) is skipped, complete lines are kept
	dir := t.TempDir()
	b, _ := os.ReadFile(fixtureRun + "/trajectory/1.jsonl")
	p := filepath.Join(dir, "1.jsonl")
	e2etest.WriteUnder(t, dir, "1.jsonl", append(b, []byte(`{"sample_index": 99, "messa`)...))
	sc2, err := openSidecar(dir, p)
	if err != nil || len(sc2.offsets) != len(side) || sc2.corrupt != 0 {
		t.Fatalf("partial line: %v %d", err, len(sc2.offsets))
	}
}

// TestConcurrentReads: many clicks on one open step at once (run with -race).
func TestConcurrentReads(t *testing.T) {
	r := Open(fixtureRun, Options{Settle: 1, MaxOpenSteps: 1})
	defer r.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := range 20 {
				k := StepKey{ID: int64(1 + (g+i)%2)} // two steps through an LRU of one: evictions while in use
				st, release, err := r.Acquire(k)
				if err != nil {
					t.Error(err)
					return
				}
				s := st.Samples[i%len(st.Samples)]
				if _, err := st.Tokens(s.Index, 0, -1, nil, 0); err != nil {
					t.Error(err)
				}
				if _, err := st.Summary(); err != nil {
					t.Error(err)
				}
				if _, err := st.Conversation(s.Index); err != nil {
					t.Error(err)
				}
				release()
			}
		}(g)
	}
	wg.Wait()
}
