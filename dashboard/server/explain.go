package server

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// explain answers GET /api/v1/steps/{id}/explain: why the trainer step took the time it did, against the median
// of its k neighboring steps (docs/dashboard-api.md; the causes and edges in docs/semconv.md §12.1).
func (s *Server) explain(r *http.Request) (any, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 {
		return nil, badData(errors.New("step id must be a non-negative integer"))
	}
	k, err := intParam(r, "k", store.ExplainK, 2, 64)
	if err != nil {
		return nil, err
	}
	e, err := s.compute.Explain(id, k, &s.explainMemo)
	if errors.Is(err, store.ErrNoStep) {
		return nil, notFound(errors.New("no trainer step " + strconv.Itoa(id)))
	}
	return e, err
}

// explainTable answers GET /api/v1/explain: every step's seconds per cause, what the compare view diffs between
// two runs ("where run B's extra minutes went"); with partial=true, the steps computed so far alone, at once
// (the page draws them while the whole table is computed).
func (s *Server) explainTable(r *http.Request) (any, error) {
	partial, err := boolParam(r, "partial")
	if err != nil {
		return nil, err
	}
	if partial {
		return s.compute.ExplainTableSoFar(&s.explainMemo), nil
	}
	return s.compute.ExplainTable(&s.explainMemo), nil
}

// settleQuiet is how long the server waits before it settles steps: after it starts (a page's first queries come
// first) and after queries interrupted it or it found them answering.
const settleQuiet = 2 * time.Second

// settler is the server's background computation of its run's settled steps' facts (settleLoop).
type settler struct {
	stop, done chan struct{}
	once       sync.Once
	// computed counts the steps it computed.
	computed atomic.Int64
}

func newSettler() *settler {
	return &settler{stop: make(chan struct{}), done: make(chan struct{})}
}

// close stops the loop and waits for it (the batch in hand, at most settleBatch steps on one core).
func (st *settler) close() {
	st.once.Do(func() { close(st.stop) })
	<-st.done
}

// settleLoop computes the facts of the run's closed, settled steps while the dashboard answers no query
// (store.SettleExplanations; docs/operations.md "Explanations computed ahead"), so that the first explanation
// and the compare page's table asked of a long run read them: a first pass when the server has been quiet for
// settleQuiet, then a look every `every` for steps settled since (a live run's steps settle about two hours
// after they end). A query arriving stops it after the batch in hand; it goes on once queries stop.
func (s *Server) settleLoop(every time.Duration) {
	st := s.settle
	defer close(st.done)
	wait := settleQuiet
	for {
		select {
		case <-st.stop:
			return
		case <-time.After(wait):
		}
		wait = settleQuiet
		if !s.idle() {
			continue
		}
		n, left := s.compute.SettleExplanations(&s.explainMemo, s.idle)
		st.computed.Add(int64(n))
		if left == 0 {
			wait = every
		}
	}
}

// settledSteps is how many steps settleLoop computed (nil: the server does not settle).
func (s *Server) settledSteps() *int64 {
	if s.settle == nil {
		return nil
	}
	n := s.settle.computed.Load()
	return &n
}

// idle says the server may settle steps: it is not closing and no query of its admission (a library's: any of
// its runs') is answered or waiting.
func (s *Server) idle() bool {
	select {
	case <-s.settle.stop:
		return false
	default:
	}
	return !s.admission.busy()
}
