package dumps

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Tokenizer turns token ids into text from a Hugging Face tokenizer.json: the model vocabulary (BPE, WordPiece,
// Unigram, WordLevel) plus added tokens, and the decoder chain (ByteLevel, Metaspace, ByteFallback, Replace,
// Fuse, Strip, WordPiece, Sequence). It only decodes; nothing here encodes.
type Tokenizer struct {
	pieces  []string // id → vocabulary string
	special []bool
	added   []bool
	decs    []decoderSpec
}

type decoderSpec struct {
	Type          string          `json:"type"`
	Decoders      []decoderSpec   `json:"decoders"`
	Replacement   string          `json:"replacement"`
	PrependScheme string          `json:"prepend_scheme"`
	AddPrefix     *bool           `json:"add_prefix_space"`
	Pattern       json.RawMessage `json:"pattern"`
	Content       string          `json:"content"`
	Start         int             `json:"start"`
	Stop          int             `json:"stop"`
	Prefix        string          `json:"prefix"`
	Cleanup       bool            `json:"cleanup"`
}

type tokenizerFile struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Decoder *decoderSpec `json:"decoder"`
	Model   struct {
		Type  string          `json:"type"`
		Vocab json.RawMessage `json:"vocab"`
	} `json:"model"`
}

const maxVocab = 1 << 22

// sparseSlack is how many more id slots than twice its tokens a vocabulary may span (reserved ranges).
const sparseSlack = 1 << 16

// LoadTokenizer reads a tokenizer.json on its own, under its directory: a link that leads out of it is not
// followed.
func LoadTokenizer(path string) (*Tokenizer, error) {
	return loadTokenizer(filepath.Dir(path), path)
}

// loadTokenizer is LoadTokenizer for a file of the run in root: a link out of the run is not followed
// (runfiles.ErrOutsideRun).
func loadTokenizer(root, path string) (*Tokenizer, error) {
	b, err := runfiles.ReadFile(root, path)
	if err != nil {
		return nil, err
	}
	var tf tokenizerFile
	if err := json.Unmarshal(b, &tf); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	// Collect the entries first and size the tables once. A real vocabulary is dense (ids 0…n-1, added tokens
	// right after); a file naming a few far-apart ids is not one, and would cost a table of the highest id (a
	// 60-byte file: 4 Mi slots, seconds to build).
	type entry struct {
		id             int
		s              string
		added, special bool
	}
	var entries []entry
	hi := -1
	add := func(e entry) error {
		if e.id < 0 || e.id >= maxVocab {
			return fmt.Errorf("tokenizer.json: token id %d out of range", e.id)
		}
		hi = max(hi, e.id)
		entries = append(entries, e)
		return nil
	}
	if len(tf.Model.Vocab) > 0 {
		switch tf.Model.Vocab[0] {
		case '{': // BPE, WordPiece, WordLevel: token → id
			var m map[string]int
			if err := json.Unmarshal(tf.Model.Vocab, &m); err != nil {
				return nil, fmt.Errorf("tokenizer.json vocab: %w", err)
			}
			for s, id := range m {
				if err := add(entry{id: id, s: s}); err != nil {
					return nil, err
				}
			}
		case '[': // Unigram: [[piece, score], …]
			var l [][]json.RawMessage
			if err := json.Unmarshal(tf.Model.Vocab, &l); err != nil {
				return nil, fmt.Errorf("tokenizer.json vocab: %w", err)
			}
			for id, e := range l {
				var s string
				if len(e) == 0 || json.Unmarshal(e[0], &s) != nil {
					return nil, fmt.Errorf("tokenizer.json: bad unigram entry %d", id)
				}
				if err := add(entry{id: id, s: s}); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, a := range tf.AddedTokens {
		if err := add(entry{id: a.ID, s: a.Content, added: true, special: a.Special}); err != nil {
			return nil, err
		}
	}
	if slots := hi + 1; slots > 2*len(entries)+sparseSlack {
		return nil, fmt.Errorf("tokenizer.json: token ids too sparse for a vocabulary (highest %d for %d tokens)", hi, len(entries))
	}
	t := &Tokenizer{pieces: make([]string, hi+1), special: make([]bool, hi+1), added: make([]bool, hi+1)}
	for _, e := range entries { // in file order: an added token replaces the vocabulary's piece of its id
		t.pieces[e.id] = e.s
		if e.added {
			t.added[e.id], t.special[e.id] = true, e.special
		}
	}
	if tf.Decoder != nil {
		t.decs = []decoderSpec{*tf.Decoder}
		if tf.Decoder.Type == "Sequence" {
			t.decs = tf.Decoder.Decoders
		}
	} else if tf.Model.Type == "WordPiece" {
		t.decs = []decoderSpec{{Type: "WordPiece", Prefix: "##"}}
	}
	return t, nil
}

// VocabSize is the number of ids the tokenizer knows.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// IsSpecial tells added special tokens.
func (t *Tokenizer) IsSpecial(id int64) bool {
	return id >= 0 && id < int64(len(t.special)) && t.special[id]
}

// Piece is the vocabulary string of an id ("" when unknown).
func (t *Tokenizer) Piece(id int64) string {
	if id < 0 || id >= int64(len(t.pieces)) {
		return ""
	}
	return t.pieces[id]
}

// bytes-to-unicode table of GPT-2's byte-level BPE, inverted.
var byteLevelInv = func() map[rune]byte {
	m := map[rune]byte{}
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			m[rune(b)] = byte(b)
		} else {
			m[rune(256+n)] = byte(b)
			n++
		}
	}
	return m
}()

// decodeChain runs the decoder chain over tokens and returns the byte pieces per token (before the final
// UTF-8 join), mirroring tokenizers' decode_chain.
// With raw, byte-producing decoders keep raw bytes (possibly partial UTF-8) for the caller to join.
func (t *Tokenizer) decodeChain(tokens []string, raw bool) []string {
	for _, d := range t.decs {
		tokens = applyDecoder(d, tokens, raw)
	}
	return tokens
}

func applyDecoder(d decoderSpec, toks []string, raw bool) []string {
	switch d.Type {
	case "ByteLevel":
		out := make([]string, len(toks))
		for i, tok := range toks {
			b := make([]byte, 0, len(tok))
			ok := true
			for _, r := range tok {
				c, found := byteLevelInv[r]
				if !found {
					ok = false
					break
				}
				b = append(b, c)
			}
			if !ok {
				b = []byte(tok)
			}
			out[i] = string(b) // raw bytes, possibly partial UTF-8
		}
		return out
	case "Metaspace":
		rep := d.Replacement
		if rep == "" {
			rep = "▁"
		}
		prepend := d.PrependScheme != "never"
		if d.AddPrefix != nil && !*d.AddPrefix {
			prepend = false
		}
		out := make([]string, len(toks))
		for i, tok := range toks {
			s := strings.ReplaceAll(tok, rep, " ")
			if i == 0 && prepend {
				s = strings.TrimPrefix(s, " ")
			}
			out[i] = s
		}
		return out
	case "Replace":
		var pat struct {
			String string `json:"String"`
		}
		if json.Unmarshal(d.Pattern, &pat) != nil || pat.String == "" {
			return toks
		}
		out := make([]string, len(toks))
		for i, tok := range toks {
			out[i] = strings.ReplaceAll(tok, pat.String, d.Content)
		}
		return out
	case "ByteFallback":
		out := make([]string, 0, len(toks))
		var pend []byte
		flush := func() {
			if pend == nil {
				return
			}
			switch {
			case raw:
				out = append(out, string(pend))
				for k := 1; k < len(pend); k++ { // keep one output per input token
					out = append(out, "")
				}
			case utf8.Valid(pend):
				out = append(out, string(pend))
			default: // as tokenizers does: one U+FFFD per byte token
				for range pend {
					out = append(out, "\uFFFD")
				}
			}
			pend = nil
		}
		for _, tok := range toks {
			if len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
				if v, err := strconv.ParseUint(tok[3:5], 16, 8); err == nil {
					pend = append(pend, byte(v))
					continue
				}
			}
			flush()
			out = append(out, tok)
		}
		flush()
		return out
	case "Fuse":
		return []string{strings.Join(toks, "")}
	case "Strip": // byte-wise, so raw partial UTF-8 survives
		c := d.Content
		if c == "" {
			c = " "
		}
		out := make([]string, len(toks))
		for i, tok := range toks {
			for k := 0; k < d.Start && strings.HasPrefix(tok, c); k++ {
				tok = tok[len(c):]
			}
			for k := 0; k < d.Stop && strings.HasSuffix(tok, c); k++ {
				tok = tok[:len(tok)-len(c)]
			}
			out[i] = tok
		}
		return out
	case "WordPiece":
		prefix := d.Prefix
		if prefix == "" {
			prefix = "##"
		}
		out := make([]string, len(toks))
		for i, tok := range toks {
			if i > 0 {
				if rest, ok := strings.CutPrefix(tok, prefix); ok {
					out[i] = rest
				} else {
					out[i] = " " + tok
				}
			} else {
				out[i] = strings.TrimPrefix(tok, prefix)
			}
		}
		return out
	}
	return toks
}

// Decode returns the text of a whole id sequence, as tokenizers' decode(ids, skip_special_tokens=False).
func (t *Tokenizer) Decode(ids []int64) string {
	toks := make([]string, len(ids))
	for i, id := range ids {
		toks[i] = t.Piece(id)
	}
	return lossyUTF8([]byte(strings.Join(t.decodeChain(toks, false), "")))
}

// TokenTexts returns one display string per id: each token's own decoded bytes, with a character split across
// tokens shown on the token that completes it (earlier parts show ""). Decoders that depend on position (a
// Metaspace prefix strip) see the window as if it started a sequence only when from == 0.
func (t *Tokenizer) TokenTexts(ids []int64, atStart bool) []string {
	toks := make([]string, len(ids))
	for i, id := range ids {
		toks[i] = t.Piece(id)
	}
	out := make([]string, len(ids))
	var carry []byte
	for i := range toks {
		one := []string{toks[i]}
		var pieces []string
		if atStart && i == 0 {
			pieces = t.decodeChain(one, true)
		} else {
			pieces = t.decodeChain(append([]string{"\x00"}, one...), true)
			if len(pieces) == 2 {
				pieces = pieces[1:]
			} else { // a joining decoder (Fuse): drop the marker
				pieces = []string{strings.TrimPrefix(strings.Join(pieces, ""), "\x00")}
			}
		}
		carry = append(carry, strings.Join(pieces, "")...)
		b := carry
		carry = nil
		// keep an incomplete trailing UTF-8 sequence for the next token
		cut := len(b)
		for k := len(b) - 1; k >= 0 && k >= len(b)-3; k-- {
			if utf8.RuneStart(b[k]) {
				if !utf8.FullRune(b[k:]) && i+1 < len(toks) {
					cut = k
				}
				break
			}
		}
		out[i] = lossyUTF8(b[:cut])
		if cut < len(b) {
			carry = append([]byte(nil), b[cut:]...)
		}
	}
	return out
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.WriteRune(r)
			i += n
			continue
		}
		// maximal subpart: a valid lead byte followed by valid continuation bytes, cut short
		j := i + 1
		if need := seqLen(b[i]); need > 1 {
			for k := 1; k < need && j < len(b); k++ {
				if !validCont(b[i], k, b[j]) {
					break
				}
				j++
			}
		}
		sb.WriteRune(utf8.RuneError)
		i = j
	}
	return sb.String()
}

func seqLen(lead byte) int {
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		return 2
	case lead >= 0xE0 && lead <= 0xEF:
		return 3
	case lead >= 0xF0 && lead <= 0xF4:
		return 4
	}
	return 1
}

func validCont(lead byte, k int, c byte) bool {
	if k == 1 {
		switch lead {
		case 0xE0:
			return c >= 0xA0 && c <= 0xBF
		case 0xED:
			return c >= 0x80 && c <= 0x9F
		case 0xF0:
			return c >= 0x90 && c <= 0xBF
		case 0xF4:
			return c >= 0x80 && c <= 0x8F
		}
	}
	return c >= 0x80 && c <= 0xBF
}
