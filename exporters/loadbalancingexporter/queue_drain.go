// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

// otelcol-miles: this file is not upstream's (README.md). An endpoint's exporter keeps its sending queue in a
// file (sending_queue.storage); a persistent queue stops reading at shutdown and keeps what it has not read for
// the next start, so the last batches of a run, handed over just before the stop, stayed on the agent's disk.
// The load balancer now waits, at shutdown, until every endpoint's queue is empty (all sent) or drainTimeout has
// passed; what is left stays on disk and is sent by the next start on the same directory.

package loadbalancingexporter // import "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"

import (
	"context"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
)

const (
	// drainTimeout bounds the wait at shutdown for the endpoints' queues to empty: an unreachable endpoint's
	// queue does not, and a stop must not wait for it (its batches stay on disk).
	drainTimeout = 5 * time.Second
	drainPoll    = 20 * time.Millisecond
	// queueSizeMetric is the exporterhelper gauge of a sending queue's size (for a persistent queue: requests not
	// yet sent, unread or in flight).
	queueSizeMetric = "otelcol_exporter_queue_size"
)

// queueWatch reads the size of one endpoint exporter's sending queue through the callback its exporterhelper
// registers for the queue-size gauge (the exporter exposes no other way to ask).
type queueWatch struct {
	mu        sync.Mutex
	gauge     metric.Int64Observable
	callbacks []metric.Callback
}

// size is the queue's size and whether the exporter has a queue that reports one.
func (w *queueWatch) size(ctx context.Context) (int64, bool) {
	w.mu.Lock()
	obs := &queueSizeObserver{gauge: w.gauge}
	callbacks := w.callbacks
	w.mu.Unlock()
	for _, cb := range callbacks {
		_ = cb(ctx, obs)
	}
	return obs.sum, obs.seen
}

type queueWatchKey struct{}

func contextWithQueueWatch(ctx context.Context, w *queueWatch) context.Context {
	return context.WithValue(ctx, queueWatchKey{}, w)
}

// watchedMeterProvider is the collector's meter provider, with the queue-size gauge's callback kept in w.
func watchedMeterProvider(ctx context.Context, mp metric.MeterProvider) metric.MeterProvider {
	w, _ := ctx.Value(queueWatchKey{}).(*queueWatch)
	if w == nil {
		return mp
	}
	return queueWatchMeterProvider{MeterProvider: mp, watch: w}
}

type queueWatchMeterProvider struct {
	metric.MeterProvider
	watch *queueWatch
}

func (p queueWatchMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return queueWatchMeter{Meter: p.MeterProvider.Meter(name, opts...), watch: p.watch}
}

type queueWatchMeter struct {
	metric.Meter
	watch *queueWatch
}

func (m queueWatchMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	g, err := m.Meter.Int64ObservableGauge(name, opts...)
	if err == nil && name == queueSizeMetric && isComparable(g) {
		m.watch.mu.Lock()
		m.watch.gauge = g
		m.watch.mu.Unlock()
	}
	return g, err
}

func (m queueWatchMeter) RegisterCallback(f metric.Callback, instruments ...metric.Observable) (metric.Registration, error) {
	m.watch.mu.Lock()
	for _, inst := range instruments {
		if m.watch.gauge != nil && isComparable(inst) && any(inst) == any(m.watch.gauge) {
			m.watch.callbacks = append(m.watch.callbacks, f)
			break
		}
	}
	m.watch.mu.Unlock()
	return m.Meter.RegisterCallback(f, instruments...)
}

func isComparable(v any) bool { return v != nil && reflect.TypeOf(v).Comparable() }

// queueSizeObserver adds up what a callback observes on the queue-size gauge.
type queueSizeObserver struct {
	embedded.Observer
	gauge metric.Int64Observable
	sum   int64
	seen  bool
}

func (*queueSizeObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {
}

func (o *queueSizeObserver) ObserveInt64(inst metric.Int64Observable, v int64, _ ...metric.ObserveOption) {
	if isComparable(inst) && any(inst) == any(o.gauge) {
		o.sum += v
		o.seen = true
	}
}

// drainQueues waits until every endpoint's queue is empty, or drainTimeout has passed, or ctx is done.
func (lb *loadBalancer) drainQueues(ctx context.Context) {
	deadline := time.Now().Add(drainTimeout)
	for {
		pending := int64(0)
		lb.updateLock.RLock()
		for _, e := range lb.exporters {
			if e.queue != nil {
				if n, ok := e.queue.size(ctx); ok {
					pending += n
				}
			}
		}
		lb.updateLock.RUnlock()
		if pending == 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(drainPoll):
		}
	}
}
