package sim

import (
	"container/heap"
	"encoding/binary"
	"math/rand/v2"
)

// TraceID and SpanID are OTLP ids.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

// Phase is one Timer interval of a process (a phase span, preceded by its open marker).
type Phase struct {
	Name   string
	Proc   *Process
	T0, T1 float64
	Step   int
	Trace  TraceID
	ID     SpanID
	Parent SpanID // zero: top level
}

// Span is one trajectory-lifecycle span (docs/semconv.md §3). Fields that do not apply to its type are zero
// and flagged off in Has.
type Span struct {
	Name, Type string
	Proc       *Process
	T0, T1     float64
	Trace      TraceID
	ID, Parent SpanID

	Has                    uint32 // bitmask of hasX
	Sample, Group, Attempt int
	Status                 string
	Turn, WV               int
	Engine                 EngineRef
	TokIn, TokOut          int
	Finish                 string
	ToolCalls              int
	Tools                  []string
	Step, Batch            int
	Links                  []TraceID
	LinkSpans              []SpanID
	// Req is the engine's view of a generate call (its request trace, enginetrace.go); nil otherwise.
	Req *Req
}

// Span attribute presence bits.
const (
	hasSample uint32 = 1 << iota
	hasStatus
	hasTurn
	hasWV
	hasEngine
	hasTokens
	hasFinish
	hasTools
	hasStep
	hasBatch
)

// EngineRef names an engine incarnation: its rank and how many times it restarted before.
type EngineRef struct{ Rank, Epoch int }

// MetricsLog is one log_metrics(step_key, step, metrics) call.
type MetricsLog struct {
	Proc    *Process
	StepKey string
	Step    int
	Keys    []string
	Vals    []float64
}

// TopoEngine is one engine of a topology snapshot.
type TopoEngine struct {
	Ref        EngineRef
	WorkerType string
	Node       int
	GPUs       []int
}

// EngineEvent changes a fake engine's state.
type EngineEvent struct {
	Ref     EngineRef
	Op      EngineOp
	Req     *Req
	Aborted bool
}

// EngineOp is what happens to an engine.
type EngineOp uint8

// Engine operations.
const (
	OpArrive EngineOp = iota
	OpBegin
	OpFinish
	OpPause
	OpResume
	OpDown // the process dies (requests already aborted)
	OpUp   // a new incarnation (Ref.Epoch) starts serving
)

// Req is one generate call on an engine, in simulated seconds.
type Req struct {
	ID                             uint64
	DP                             int
	Prompt, Cached, Completion     int
	Submit, Start, FirstToken, End float64
}

// Kind tells which field of an Event is set.
type Kind uint8

// Event kinds.
const (
	EvPhaseOpen Kind = iota
	EvPhaseClose
	EvSpan
	EvMetrics
	EvTopology
	EvEngine
	EvDumpRollout // miles writes rollout_data/<step>.pt and its trajectory sidecar
	EvDumpTrain   // every train rank writes train_data/<step>_<rank>.pt
	EvDumpEval    // miles writes rollout_data/eval_<step>.pt and trajectory/eval_<step>.jsonl
	EvRunConfig   // the driver records its arguments (record_run_config, docs/semconv.md §11)
)

// Event is one thing that happens at simulated time T.
type Event struct {
	T       float64
	Kind    Kind
	seq     uint64
	Phase   *Phase
	Span    *Span
	Metrics *MetricsLog
	Topo    []TopoEngine
	Engine  EngineEvent
	Dump    *StepDump
	Args    []RunArg
}

type eventHeap []Event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].T != h[j].T {
		return h[i].T < h[j].T
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(Event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// out is the ordered output of the generator.
type out struct {
	h   eventHeap
	seq uint64
}

func (o *out) push(e Event) {
	o.seq++
	e.seq = o.seq
	heap.Push(&o.h, e)
}

func (o *out) phaseOpen(p *Phase)  { o.push(Event{T: p.T0, Kind: EvPhaseOpen, Phase: p}) }
func (o *out) phaseClose(p *Phase) { o.push(Event{T: p.T1, Kind: EvPhaseClose, Phase: p}) }

// ids draws trace and span ids from the run's random stream.
type ids struct{ r *rand.Rand }

func (g ids) trace() (t TraceID) {
	a, b := g.r.Uint64(), g.r.Uint64()
	binary.LittleEndian.PutUint64(t[:8], a)
	binary.LittleEndian.PutUint64(t[8:], b)
	return t
}

func (g ids) span() (s SpanID) {
	a := g.r.Uint64() | 1
	binary.LittleEndian.PutUint64(s[:], a)
	return s
}
