package dumps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The trajectory sidecar trajectory/[eval_]<id>.jsonl holds one line per sample that has messages:
// {sample_index, group_index, status, reward, prompt, messages}. The reader indexes line offsets (not
// contents), so a sample's conversation is a point read too; a trailing partial line is skipped until complete.

type sidecarFile struct {
	root    string // the run directory path is read under (a link out of it is not followed)
	path    string
	size    int64
	modTime time.Time
	offsets map[int64][2]int64 // sample_index → [start, end) of its line
	corrupt int
}

// openSidecar indexes the sidecar at path, a file of the run in root: a link out of the run is not followed
// (runfiles.ErrOutsideRun).
func openSidecar(root, path string) (*sidecarFile, error) {
	f, err := runfiles.Open(root, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sc := &sidecarFile{root: root, path: path, size: fi.Size(), modTime: fi.ModTime(), offsets: map[int64][2]int64{}}
	pos := 0
	for pos < len(b) {
		nl := bytes.IndexByte(b[pos:], '\n')
		if nl < 0 {
			break // trailing partial line: still being written
		}
		line := b[pos : pos+nl]
		var head struct {
			SampleIndex *int64 `json:"sample_index"`
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if json.Unmarshal(line, &head) != nil || head.SampleIndex == nil {
				sc.corrupt++
			} else {
				sc.offsets[*head.SampleIndex] = [2]int64{int64(pos), int64(pos + nl)}
			}
		}
		pos += nl + 1
	}
	return sc, nil
}

// row reads one sample's line.
func (sc *sidecarFile) row(si int64) (map[string]json.RawMessage, error) {
	o, ok := sc.offsets[si]
	if !ok {
		return nil, nil
	}
	f, err := runfiles.Open(sc.root, sc.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, o[1]-o[0])
	if _, err := f.ReadAt(buf, o[0]); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("%s: sample %d: %w", sc.path, si, err)
	}
	return m, nil
}

// Block is one piece of a message for display: text, thinking, a tool call, or markup kept verbatim.
type Block struct {
	Type      string `json:"type"` // "text" | "thinking" | "tool_call"
	Text      string `json:"text,omitempty"`
	Name      string `json:"name,omitempty"`      // tool_call
	Arguments string `json:"arguments,omitempty"` // tool_call: pretty-printed JSON, or the raw text when not JSON
	Valid     *bool  `json:"valid_json,omitempty"`
}

// Message is one normalized conversation message.
type Message struct {
	Index     int     `json:"index"`
	Role      string  `json:"role"`
	Name      string  `json:"name,omitempty"`
	Blocks    []Block `json:"blocks"`
	Collapsed bool    `json:"collapsed"` // system and tool messages start collapsed
}

// Conversation is a sample's sidecar row, normalized for display.
type Conversation struct {
	SampleIndex int64           `json:"sample_index"`
	GroupIndex  *int64          `json:"group_index"`
	Status      string          `json:"status,omitempty"`
	Reward      *float64        `json:"reward"`
	Messages    []Message       `json:"messages"`
	Turns       int             `json:"turns"`      // assistant messages
	ToolCalls   int             `json:"tool_calls"` // tool calls made by the assistant
	Prompt      json.RawMessage `json:"prompt,omitempty"`
}

var (
	specialRe = regexp.MustCompile(`<\|[^|<>\s]{1,64}\|>`)
	thinkRe   = regexp.MustCompile(`(?s)<think>(.*?)(?:</think>|$)`)
	toolRe    = regexp.MustCompile(`(?s)<tool_call>(.*?)(?:</tool_call>|$)`)
)

type rawMessage struct {
	Role             string          `json:"role"`
	Name             string          `json:"name"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
		Name string `json:"name"`
	} `json:"tool_calls"`
}

// contentText flattens OpenAI content (a string or a list of parts) to text.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []map[string]any
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if t, ok := p["text"].(string); ok {
				b.WriteString(t)
			} else if typ, ok := p["type"].(string); ok {
				b.WriteString("[" + typ + "]")
			}
		}
		return b.String()
	}
	return string(raw)
}

func prettyArgs(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw, false
	}
	// OpenAI sends arguments as a JSON string holding JSON
	if s, ok := v.(string); ok {
		var inner any
		if json.Unmarshal([]byte(s), &inner) == nil {
			v = inner
		}
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b), true
}

// splitMarkup turns assistant text into blocks: <think> → thinking, <tool_call>{json}</tool_call> → tool call,
// <|special|> tokens dropped, any other markup left verbatim in text blocks.
func splitMarkup(text string) ([]Block, int) {
	text = specialRe.ReplaceAllString(text, "")
	var blocks []Block
	calls := 0
	addText := func(s string) {
		if strings.TrimSpace(s) != "" {
			blocks = append(blocks, Block{Type: "text", Text: strings.Trim(s, "\n")})
		}
	}
	type span struct {
		a, b int
		blk  Block
	}
	var spans []span
	for _, m := range thinkRe.FindAllStringSubmatchIndex(text, -1) {
		spans = append(spans, span{m[0], m[1], Block{Type: "thinking", Text: strings.TrimSpace(text[m[2]:m[3]])}})
	}
	for _, m := range toolRe.FindAllStringSubmatchIndex(text, -1) {
		body := text[m[2]:m[3]]
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		blk := Block{Type: "tool_call"}
		ok := json.Unmarshal([]byte(strings.TrimSpace(body)), &call) == nil && call.Name != ""
		if ok {
			blk.Name = call.Name
			blk.Arguments, _ = prettyArgs(string(call.Arguments))
		} else {
			blk.Arguments = strings.TrimSpace(body)
		}
		blk.Valid = &ok
		spans = append(spans, span{m[0], m[1], blk})
		calls++
	}
	// drop tool calls inside thinking (nested), keep order
	for i := 0; i < len(spans); i++ {
		for j := i + 1; j < len(spans); j++ {
			if spans[j].a < spans[i].a {
				spans[i], spans[j] = spans[j], spans[i]
			}
		}
	}
	pos := 0
	for _, s := range spans {
		if s.a < pos {
			if s.blk.Type == "tool_call" {
				calls--
			}
			continue
		}
		addText(text[pos:s.a])
		blocks = append(blocks, s.blk)
		pos = s.b
	}
	addText(text[pos:])
	return blocks, calls
}

// normalizeConversation builds the display form of a sidecar row.
func normalizeConversation(si int64, row map[string]json.RawMessage) (*Conversation, error) {
	c := &Conversation{SampleIndex: si, Messages: []Message{}}
	var g int64
	if json.Unmarshal(row["group_index"], &g) == nil {
		c.GroupIndex = &g
	}
	_ = json.Unmarshal(row["status"], &c.Status)
	var r float64
	if json.Unmarshal(row["reward"], &r) == nil {
		c.Reward = &r
	}
	c.Prompt = row["prompt"]
	var msgs []rawMessage
	if err := json.Unmarshal(row["messages"], &msgs); err != nil {
		return nil, fmt.Errorf("sample %d: messages: %w", si, err)
	}
	for i, m := range msgs {
		out := Message{Index: i, Role: m.Role, Name: m.Name, Collapsed: m.Role == "system" || m.Role == "tool"}
		text := contentText(m.Content)
		if m.ReasoningContent != "" {
			out.Blocks = append(out.Blocks, Block{Type: "thinking", Text: strings.TrimSpace(m.ReasoningContent)})
		}
		if m.Role == "assistant" {
			blocks, calls := splitMarkup(text)
			out.Blocks = append(out.Blocks, blocks...)
			c.ToolCalls += calls
			c.Turns++
		} else {
			t := specialRe.ReplaceAllString(text, "")
			if t != "" {
				out.Blocks = append(out.Blocks, Block{Type: "text", Text: t})
			}
		}
		for _, tc := range m.ToolCalls {
			name := tc.Function.Name
			if name == "" {
				name = tc.Name
			}
			args := string(tc.Function.Arguments)
			pretty, ok := prettyArgs(args)
			out.Blocks = append(out.Blocks, Block{Type: "tool_call", Name: name, Arguments: pretty, Valid: &ok})
			c.ToolCalls++
		}
		if out.Blocks == nil {
			out.Blocks = []Block{}
		}
		c.Messages = append(c.Messages, out)
	}
	return c, nil
}
