package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sender posts OTLP/HTTP protobuf bodies to a collector with a few workers and a bounded queue, so a slow
// collector slows the simulation instead of growing memory. Retryable answers (429, 502, 503, 504, connection
// errors) are retried with backoff for up to giveUp; a request that still fails then, or gets a permanent error,
// is counted and makes the run fail (fatal), so nothing is dropped silently and a missing collector ends the run.
type sender struct {
	base   string   // the first endpoint (messages)
	bases  []string // every endpoint; requests go round-robin (several agents, one per simulated node group)
	next   atomic.Uint64
	client *http.Client
	q      chan job
	wg     sync.WaitGroup
	ctx    context.Context
	giveUp time.Duration
	fatal  atomic.Value // string

	requests, bytes, retries, failed atomic.Int64
	firstErr                         atomic.Value
}

type job struct {
	path string
	body []byte
	base string
}

// newSender posts to endpoint, or round-robin to each of a comma-separated list of endpoints.
func newSender(ctx context.Context, endpoint string, workers int, giveUp time.Duration) *sender {
	var bases []string
	for base := range strings.SplitSeq(endpoint, ",") {
		base = strings.TrimSpace(base)
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
			base = "http://" + base
		}
		bases = append(bases, strings.TrimRight(base, "/"))
	}
	s := &sender{
		base: bases[0], bases: bases, ctx: ctx, q: make(chan job, 2*workers), giveUp: giveUp,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}},
	}
	for range workers {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

// err is the error that ended sending, if any.
func (s *sender) err() error {
	if f, ok := s.fatal.Load().(string); ok {
		return fmt.Errorf("giving up on the collector at %s: %s", s.base, f)
	}
	return nil
}

func (s *sender) send(path string, body []byte) {
	if s.err() != nil {
		s.failed.Add(1)
		return
	}
	base := s.bases[(s.next.Add(1)-1)%uint64(len(s.bases))]
	select {
	case s.q <- job{path, body, base}:
	case <-s.ctx.Done():
		s.failed.Add(1)
	}
}

func (s *sender) close() {
	close(s.q)
	s.wg.Wait()
}

func (s *sender) work() {
	defer s.wg.Done()
	for j := range s.q {
		s.post(j)
	}
}

func (s *sender) post(j job) {
	if s.err() != nil {
		s.failed.Add(1)
		return
	}
	backoff := 50 * time.Millisecond
	start := time.Now()
	for {
		err := s.once(j)
		if err == nil {
			s.requests.Add(1)
			s.bytes.Add(int64(len(j.body)))
			return
		}
		var permanent permanent
		perm := errors.As(err, &permanent)
		if perm || s.ctx.Err() != nil || time.Since(start) > s.giveUp {
			s.failed.Add(1)
			s.firstErr.CompareAndSwap(nil, fmt.Sprint(err))
			if s.ctx.Err() == nil {
				s.fatal.CompareAndSwap(nil, fmt.Sprint(err))
			}
			return
		}
		s.retries.Add(1)
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
			s.failed.Add(1)
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

type permanent struct{ error }

func (s *sender) once(j job) error {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, j.base+j.path, bytes.NewReader(j.body))
	if err != nil {
		return permanent{err}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		return fmt.Errorf("%s: %s", resp.Status, msg)
	default:
		return permanent{fmt.Errorf("POST %s: %s: %s", j.path, resp.Status, msg)}
	}
}
