package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// vocab is the simulated run's tokenizer: a Qwen-shaped byte-level BPE (256 byte tokens, a few hundred word
// pieces with and without a leading space, chat and markup added tokens). The dump writer builds token ids
// from it and writes it as tokenizer/tokenizer.json, so the dashboard shows token text. It only has to decode
// what the simulator writes: there are no merges.
type vocab struct {
	pieces []string         // id → text
	byText map[string]int32 // text → id (the longest-match encoder)
	maxLen int              // longest piece in bytes
	words  []int32          // " word" pieces (filler)
	caps   []int32          // "Word" pieces (a message's first word)
	capsSp []int32          // " Word" pieces (a sentence's first word)
	nums   []int32          // " 0" … " 99"
	punct  []int32          // ".", ",", " =", " +", …
	nl     int32
	added  []addedToken
}

type addedToken struct {
	id      int32
	content string
	special bool
}

// Chat and markup tokens (Qwen's chat template; <think> and <tool_call> are plain added tokens there too).
const (
	tokEndOfText = "<|endoftext|>"
	tokIMStart   = "<|im_start|>"
	tokIMEnd     = "<|im_end|>"
	tokThink     = "<think>"
	tokThinkEnd  = "</think>"
	tokToolCall  = "<tool_call>"
	tokToolEnd   = "</tool_call>"
)

// transformersClass is the transformers class that loads the tokenizer files (Qwen2's, as the vocabulary is).
const transformersClass = "Qwen2Tokenizer"

var simWords = strings.Fields(`the a an of to and is in that it for we this so be with as on by at from are can let us
first then now next since because therefore thus hence which equals equal sum product difference number numbers value
values answer result total each both two three four five six seven eight nine ten hundred thousand half twice square
root prime factor factors divisible remainder divide multiply add subtract times plus minus over per step check verify
compute solve find given need know write gives means using use tool call output function list count length integer
integers even odd positive negative digit digits case cases condition true false only not all any one zero more less
than greater smaller largest smallest ratio rate percent probability expected area perimeter triangle circle radius
angle side sides line point points x y n k m equation equations term terms sequence series pattern mod modulo formula
simplify expand substitute plug back into yields wait actually hmm right correct wrong mistake again try final boxed
problem question assume suppose consider note recall compare look print code run returned returns got matches works`)

var simPunct = []string{".", ",", ":", "?", " =", " +", " -", " *", " /", " (", ")", " is", "\n", "\n\n"}

// bytesToUnicode is GPT-2's byte-level alphabet: the printable bytes map to themselves, the others to U+0100….
// The order of bs is the id order of the 256 byte tokens.
func bytesToUnicode() (bs []byte, cs []rune) {
	var rest []byte
	for i := range 256 {
		b := byte(i)
		if '!' <= b && b <= '~' || 0xa1 <= b && b <= 0xac || 0xae <= b {
			bs, cs = append(bs, b), append(cs, rune(b))
		} else {
			rest = append(rest, b)
		}
	}
	next := rune(256)
	for _, b := range rest {
		bs, cs = append(bs, b), append(cs, next)
		next++
	}
	return bs, cs
}

func newVocab() *vocab {
	v := &vocab{byText: map[string]int32{}}
	var next int32 // ids are dense, in the order pieces are added: next is len(v.pieces)
	add := func(text string) int32 {
		if id, ok := v.byText[text]; ok {
			return id
		}
		id := next
		next++
		v.pieces = append(v.pieces, text)
		v.byText[text] = id
		v.maxLen = max(v.maxLen, len(text))
		return id
	}
	bs, _ := bytesToUnicode()
	for _, b := range bs {
		add(string([]byte{b}))
	}
	for _, w := range simWords {
		v.words = append(v.words, add(" "+w))
		add(w)
		v.caps = append(v.caps, add(strings.ToUpper(w[:1])+w[1:]))
		v.capsSp = append(v.capsSp, add(" "+strings.ToUpper(w[:1])+w[1:]))
	}
	for i := range 100 {
		v.nums = append(v.nums, add(" "+strconv.Itoa(i)))
		add(strconv.Itoa(i))
	}
	for _, p := range simPunct {
		v.punct = append(v.punct, add(p))
	}
	for _, s := range []string{
		"system", "user", "assistant", "tool", "You", " are", " helpful", " assistant", ".\n",
		`{"`, `name`, `":`, ` "`, `",`, `arguments`, `":`, ` {"`, `code`, `query`, `expression`, `"}}`, "print", "(", ")",
	} {
		add(s)
	}
	v.nl = v.byText["\n"]
	for _, t := range []struct {
		s       string
		special bool
	}{
		{tokEndOfText, true},
		{tokIMStart, true},
		{tokIMEnd, true},
		{tokThink, false},
		{tokThinkEnd, false},
		{tokToolCall, false},
		{tokToolEnd, false},
	} {
		id := add(t.s)
		v.added = append(v.added, addedToken{id, t.s, t.special})
	}
	return v
}

// encode tokenizes text by longest match over the vocabulary (every byte is a token, so it never fails).
func (v *vocab) encode(text string) []int32 {
	var out []int32
	for i := 0; i < len(text); {
		n := min(v.maxLen, len(text)-i)
		for ; n > 1; n-- {
			if _, ok := v.byText[text[i:i+n]]; ok {
				break
			}
		}
		out = append(out, v.byText[text[i:i+n]])
		i += n
	}
	return out
}

func (v *vocab) decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(v.pieces[id])
	}
	return b.String()
}

// filler is exactly n tokens of reasoning-like text: words, numbers and punctuation; a sentence ends every
// few words, and sentences start with a capital.
func (v *vocab) filler(r *rand.Rand, n int) []int32 {
	if n <= 0 {
		return nil
	}
	out := make([]int32, 0, n)
	out = append(out, v.caps[r.IntN(len(v.caps))])
	since := 1
	for len(out) < n {
		if since == 0 {
			if out[len(out)-1] == v.nl {
				out = append(out, v.caps[r.IntN(len(v.caps))])
			} else {
				out = append(out, v.capsSp[r.IntN(len(v.capsSp))])
			}
			since++
			continue
		}
		switch x := r.Float64(); {
		case since > 5 && x < 0.12:
			out = append(out, v.punct[0])
			since = 0
			if r.Float64() < 0.25 && len(out) < n {
				out = append(out, v.nl)
			}
		case x < 0.18:
			out = append(out, v.nums[r.IntN(len(v.nums))])
			since++
		case x < 0.24:
			out = append(out, v.punct[1+r.IntN(len(v.punct)-3)])
			since++
		default:
			out = append(out, v.words[r.IntN(len(v.words))])
			since++
		}
	}
	return out[:n]
}

// writeTokenizer writes dir/tokenizer.json (the Hugging Face format the dashboard reads) with
// tokenizer_config.json and special_tokens_map.json beside it, as save_pretrained leaves them.
func (v *vocab) writeTokenizer(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bs, cs := bytesToUnicode()
	enc := map[byte]rune{}
	for i, b := range bs {
		enc[b] = cs[i]
	}
	byteLevel := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteRune(enc[s[i]])
		}
		return b.String()
	}
	isAdded := map[int32]bool{}
	var added []map[string]any
	for _, a := range v.added {
		isAdded[a.id] = true
		added = append(added, map[string]any{
			"id": a.id, "content": a.content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": a.special,
		})
	}
	// vocab as an object in id order (json.Marshal of a map would sort the keys)
	var vb strings.Builder
	vb.WriteByte('{')
	first := true
	for id, p := range v.pieces {
		if isAdded[int32(id)] {
			continue
		}
		k, _ := marshalJSON(byteLevel(p), "")
		if !first {
			vb.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&vb, "%s:%d", k, id)
	}
	vb.WriteByte('}')
	tj := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   added,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": json.RawMessage(vb.String()), "merges": []string{},
		},
	}
	files := map[string]any{
		"tokenizer.json": tj,
		"tokenizer_config.json": map[string]any{
			"tokenizer_class": transformersClass, "model_max_length": 131072,
			"eos_token": tokIMEnd, "pad_token": tokEndOfText, "bos_token": nil, "clean_up_tokenization_spaces": false,
			"errors": "replace", "split_special_tokens": false,
		},
		"special_tokens_map.json": map[string]any{
			"eos_token": tokIMEnd, "pad_token": tokEndOfText,
			"additional_special_tokens": []string{tokIMStart, tokIMEnd},
		},
	}
	for name, obj := range files {
		b, err := marshalJSON(obj, "  ")
		if err != nil {
			return err
		}
		if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes a file through a temporary name renamed into place.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// marshalJSON encodes like Python's json.dumps(ensure_ascii=False): no HTML escaping of <, > and &.
func marshalJSON(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", indent)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
