// Package e2e holds end-to-end tests across components: they build nothing themselves but start the real
// otelcol-miles binary (bin/otelcol-miles, built by `make build`) and real peers, send real OTLP, and read
// the run directory back. Test names contain "E2E" so `make e2e-test` can select them.
package e2e
