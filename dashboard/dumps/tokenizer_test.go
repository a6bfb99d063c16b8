package dumps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type expectedFile struct {
	Torch string `json:"torch"`
	Steps map[string]struct {
		Samples map[string]struct {
			GroupIndex      int64     `json:"group_index"`
			Status          string    `json:"status"`
			Reward          float64   `json:"reward"`
			RawReward       float64   `json:"raw_reward"`
			ResponseLength  int       `json:"response_length"`
			Tokens          []int64   `json:"tokens"`
			LossMask        []int64   `json:"loss_mask"`
			RolloutLogProbs []float64 `json:"rollout_log_probs"`
			WeightVersions  []string  `json:"weight_versions"`
			RemoveSample    bool      `json:"remove_sample"`
			Response        string    `json:"response"`
		} `json:"samples"`
		Train   map[string]map[string][]float64 `json:"train"`
		Sidecar map[string]json.RawMessage      `json:"sidecar"`
	} `json:"steps"`
	EvalSteps map[string]struct {
		Samples map[string]struct {
			Tokens []int64 `json:"tokens"`
			Reward float64 `json:"reward"`
			Status string  `json:"status"`
		} `json:"samples"`
	} `json:"eval_steps"`
	Tokenizer   tokenizerGolden `json:"tokenizer"`
	TokenizerSP tokenizerGolden `json:"tokenizer_sp"`
}

type tokenizerGolden struct {
	VocabSize int      `json:"vocab_size"`
	PerID     []string `json:"per_id"`
	Sequences []struct {
		IDs  []int64 `json:"ids"`
		Text string  `json:"text"`
	} `json:"sequences"`
}

func loadExpected(tb testing.TB) *expectedFile {
	tb.Helper()
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		tb.Fatal(err)
	}
	var e expectedFile
	if err := json.Unmarshal(b, &e); err != nil {
		tb.Fatal(err)
	}
	return &e
}

const fixtureRun = "testdata/run"

func TestTokenizerMatchesTokenizersDecode(t *testing.T) {
	exp := loadExpected(t)
	t.Run("byte-level BPE", func(t *testing.T) {
		checkTokenizer(t, fixtureRun+"/tokenizer/tokenizer.json", &exp.Tokenizer)
	})
	t.Run("metaspace byte-fallback", func(t *testing.T) {
		checkTokenizer(t, "testdata/tokenizer-sp.json", &exp.TokenizerSP)
	})
}

func checkTokenizer(t *testing.T, path string, exp *tokenizerGolden) {
	tok, err := LoadTokenizer(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.PerID) == 0 || len(exp.Sequences) == 0 {
		t.Fatal("empty golden")
	}
	if tok.VocabSize() != exp.VocabSize {
		t.Fatalf("vocab %d, tokenizers says %d", tok.VocabSize(), exp.VocabSize)
	}
	for id, want := range exp.PerID {
		if got := tok.Decode([]int64{int64(id)}); got != want {
			t.Errorf("decode([%d]) = %q, tokenizers gives %q", id, got, want)
		}
	}
	for i, s := range exp.Sequences {
		if got := tok.Decode(s.IDs); got != s.Text {
			t.Errorf("sequence %d: %q, tokenizers gives %q", i, got, s.Text)
		}
		// per-token texts joined give the whole text back
		joined := ""
		for _, p := range tok.TokenTexts(s.IDs, true) {
			joined += p
		}
		if joined != s.Text {
			t.Errorf("sequence %d: token texts join to %q, want %q", i, joined, s.Text)
		}
	}
}

// TestSparseTokenizerRefused: a tiny tokenizer.json naming a far-apart id is not a vocabulary: refused with a
// clear error instead of building a 4 Mi-slot table (fuzzing found it: seconds and ~100 MB per 60-byte file).
// A dense one with a reserved range after its added tokens still loads.
func TestSparseTokenizerRefused(t *testing.T) {
	for _, s := range []string{
		`{"model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[{"id":4194303,"content":"x"}]}`,
		`{"model":{"type":"BPE","vocab":{"a":4194303}}}`,
	} {
		p := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTokenizer(p); err == nil || !strings.Contains(err.Error(), "too sparse") {
			t.Fatalf("%s: %v, want a too-sparse error", s, err)
		}
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1}},"added_tokens":[{"id":60000,"content":"<|x|>","special":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadTokenizer(p)
	if err != nil || tok.VocabSize() != 60001 || !tok.IsSpecial(60000) || tok.Piece(1) != "b" {
		t.Fatalf("dense tokenizer with a reserved range: %v", err)
	}
}
