package server

import (
	"errors"
	"net/http"
	"runtime"
	"sync/atomic"
)

// Admission bounds the API queries answered at once, across every server that shares it (a library's runs):
// what queries hold in memory (hours read for them, answers being built and written) grows with the limit, not
// with the number of clients, so the memory budget holds under any concurrency (docs/operations.md "Memory").
// A query waits for a slot while its client waits; past maxWaiting waiting queries it is refused as
// unavailable (503), which a page retries.
type Admission struct {
	slots      chan struct{}
	waiting    atomic.Int64
	maxWaiting int64
}

// NewAdmission returns an admission of n queries at once (n <= 0: twice the CPUs, at least 4).
func NewAdmission(n int) *Admission {
	if n <= 0 {
		n = max(4, 2*runtime.GOMAXPROCS(0))
	}
	return &Admission{slots: make(chan struct{}, n), maxWaiting: int64(64 * n)}
}

// busy says a query holds a slot or waits for one.
func (a *Admission) busy() bool { return len(a.slots) > 0 || a.waiting.Load() > 0 }

var errBusy = &apiError{errorUnavailable, errors.New("the dashboard is answering as many queries as it admits at once; retry")}

// wrap admits h's requests: each runs holding a slot, from its start to its last byte written. A nil
// admission admits every request.
func (a *Admission) wrap(h http.HandlerFunc) http.HandlerFunc {
	if a == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case a.slots <- struct{}{}:
		default:
			if a.waiting.Add(1) > a.maxWaiting {
				a.waiting.Add(-1)
				respondError(w, errBusy)
				return
			}
			select {
			case a.slots <- struct{}{}:
				a.waiting.Add(-1)
			case <-r.Context().Done(): // the client left: nothing to answer
				a.waiting.Add(-1)
				return
			}
		}
		defer func() { <-a.slots }()
		h(w, r)
	}
}
