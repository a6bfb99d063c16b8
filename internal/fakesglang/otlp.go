package fakesglang

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// SpanExporter sends the fake's request spans the way sglang's BatchSpanProcessor does: batched (at most
// MaxBatch spans, or every Delay), over OTLP gRPC (sglang's default, --otlp-traces-endpoint host:port) or OTLP
// HTTP protobuf (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf, endpoint http://host:4318/v1/traces).
type SpanExporter struct {
	endpoint string
	grpc     *grpc.ClientConn
	client   ptraceotlp.GRPCClient
	http     *http.Client

	mu      sync.Mutex
	pending ptrace.Traces
	spans   ptrace.SpanSlice
	n       int
	sent    int
	failed  int
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// Batching defaults of sglang (SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS, ..._MAX_EXPORT_BATCH_SIZE).
const (
	ExportDelay    = 500 * time.Millisecond
	ExportMaxBatch = 64
)

// NewSpanExporter exports to endpoint with protocol "grpc" or "http/protobuf".
func NewSpanExporter(endpoint, protocol string) (*SpanExporter, error) {
	e := &SpanExporter{endpoint: endpoint, kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	switch protocol {
	case "grpc", "":
		conn, err := grpc.NewClient(strings.TrimPrefix(endpoint, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		e.grpc, e.client = conn, ptraceotlp.NewGRPCClient(conn)
	case "http/protobuf":
		e.http = &http.Client{Timeout: 10 * time.Second}
	default:
		return nil, fmt.Errorf("unsupported OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
	e.reset()
	go e.loop()
	return e, nil
}

func (e *SpanExporter) reset() { e.pending, e.spans = NewTraces(); e.n = 0 }

// Add queues one request's spans, built by fn into the batch's span slice (Tracer.Append).
func (e *SpanExporter) Add(fn func(ptrace.SpanSlice) int) {
	e.mu.Lock()
	e.n += fn(e.spans)
	full := e.n >= ExportMaxBatch
	e.mu.Unlock()
	if full {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

func (e *SpanExporter) loop() {
	defer close(e.stopped)
	t := time.NewTicker(ExportDelay)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			e.Flush()
			return
		case <-t.C:
		case <-e.kick:
		}
		e.Flush()
	}
}

// Flush sends what is queued now.
func (e *SpanExporter) Flush() {
	e.mu.Lock()
	if e.n == 0 {
		e.mu.Unlock()
		return
	}
	td, n := e.pending, e.n
	e.reset()
	e.mu.Unlock()
	err := e.send(td)
	e.mu.Lock()
	if err != nil {
		e.failed += n
	} else {
		e.sent += n
	}
	e.mu.Unlock()
}

func (e *SpanExporter) send(td ptrace.Traces) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	if e.client != nil {
		_, err := e.client.Export(ctx, req)
		return err
	}
	body, err := req.MarshalProto()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := e.http.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("OTLP HTTP export: %s", resp.Status)
	}
	return nil
}

// Stats returns the spans sent and the spans whose export failed.
func (e *SpanExporter) Stats() (sent, failed int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent, e.failed
}

// Close flushes and stops the exporter.
func (e *SpanExporter) Close() error {
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	<-e.stopped
	if e.grpc != nil {
		return e.grpc.Close()
	}
	return nil
}
