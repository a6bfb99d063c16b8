# otelcol-miles — build, test, demo. Every dependency is fetched by these targets (Go module proxy, PyPI).
# The README documents `make demo` and `make test`; CI runs `.ci/run` which calls `make test`.

SHELL := /bin/bash
GO ?= go
# go-nvml (NVML receiver) needs cgo. One fixed set of flags everywhere so the build cache is shared
# between `go build`, `go test` and `go vet`.
export CGO_ENABLED := 1
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations

BIN := bin/otelcol-miles
OCB := $(GO) tool -modfile=tools/ocb/go.mod builder
GOLANGCI_LINT := $(GO) tool -modfile=tools/golangci-lint/go.mod golangci-lint

.PHONY: all dist build generate check-generate test test-stress unit-test e2e-test python-test web-test screenshots lint nocgo-build bench demo clean reliability

all: build

## build: compile the otelcol-miles distribution from the committed sources in otelcol-miles/
build:
	@mkdir -p bin
	@[ -x $(BIN) ] || echo "building $(BIN): the first build compiles the whole collector distribution (~5 min on 2 cores); packages are listed as they compile"
	cd otelcol-miles && $(GO) build $(if $(wildcard $(BIN)),,-v) -o ../$(BIN) .

## generate: regenerate otelcol-miles/ from builder-config.yaml with the pinned ocb
generate:
	$(OCB) --config builder-config.yaml --skip-compilation

## check-generate: fail when regeneration changes the committed distribution sources
check-generate: generate
	@if [ -n "$$(git status --porcelain -- otelcol-miles)" ]; then \
		git status --porcelain -- otelcol-miles; git --no-pager diff --stat -- otelcol-miles; \
		echo "otelcol-miles/ is stale: run 'make generate' and commit the result"; exit 1; fi

## unit-test: Go unit tests of our own packages with the race detector (no binary needed)
unit-test:
	$(GO) test -race -count=1 ./...

## jaeger: Jaeger v1.75.0 (the v2 binary) from its own tools module, the trace backend of the forwarding e2e test
jaeger: bin/jaeger
bin/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p bin
	cd tools/jaeger && $(GO) build -o ../../bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

## e2e-test: end-to-end tests that start the real binary (built first)
e2e-test: build jaeger
	MILES_E2E_REQUIRE=1 $(GO) test -count=1 -run 'E2E' ./...

## python-test: the stdlib emitter's tests (creates python/.venv with test-only deps)
python-test: build
	@if [ -f python/Makefile ]; then MILES_E2E_REQUIRE=1 $(MAKE) -C python test; fi

## web-test: the SPA's bundle is current, its unit tests, and browser tests in Debian chromium (installed if missing)
web-test:
	$(MAKE) -C dashboard/web check-dist test test-browser

## screenshots: refresh the README's docs/screenshots from a browser-test run (the tests write them to a scratch dir)
screenshots:
	$(MAKE) -C dashboard/web screenshots

## test-stress: the e2e package and the browser suite 5 times back to back (STRESS_RUNS) while busy loops hold
## every core; not part of `make test` or CI (scripts/test-stress.sh lists its knobs)
test-stress: build jaeger
	scripts/test-stress.sh

## test: everything CI checks
test: check-generate build jaeger lint nocgo-build
	$(MAKE) -C python venv  # the Perfetto export test reads traces with PyPI perfetto from this venv
	scripts/sglang-venv.sh  # sglang's own metrics code for the real-sglang e2e tests (docs/semconv.md §7)
	scripts/miles-venv.sh   # the published miles for the real-miles e2e tests (docs/python.md "Compatibility")
	MILES_E2E_REQUIRE=1 $(GO) test -race -count=1 $$($(GO) list ./... | grep -v '/e2e$$')
	scripts/run-together.sh \
		e2e 'MILES_E2E_REQUIRE=1 $(GO) test -count=1 -timeout 30m ./e2e/' \
		python-and-web 'if [ -f python/Makefile ]; then MILES_E2E_REQUIRE=1 $(MAKE) -C python test || exit; fi; $(MAKE) web-test'

## lint: go vet and golangci-lint (.golangci.yml, pinned in tools/golangci-lint) over our own packages; never the
## generated distribution otelcol-miles/ (its own module, so ./... of the root module leaves it out)
lint:
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

## nocgo-build: our packages build with CGO_ENABLED=0 (the nvml receiver's build-tag split: no libnvidia-ml, the
## receiver disables itself), and the receiver's tests pass that way
nocgo-build:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./receivers/nvmlreceiver/...

## reliability: the kill -9 / disk / outage / fuzz / exposure campaign (docs/reliability.md), loopback only, bounded
## (~15 min with its defaults; scripts/reliability/run.sh lists the knobs); not part of `make test`
reliability: build
	$(GO) build -o bin/miles-sim ./cmd/miles-sim
	$(GO) build -o bin/miles-dashboard ./cmd/miles-dashboard
	scripts/reliability/run.sh

## bench: exporter and component benchmarks (see BENCHMARKS.md)
bench:
	@if [ -x bench/run.sh ]; then bench/run.sh; else $(GO) test -run '^$$' -bench . -benchmem ./bench/...; fi

## dist: the miles-otel wheel and the otelcol-miles / miles-dashboard archives for linux amd64 and arm64, with
## SHA256SUMS, in dist/ (scripts/dist.sh; arm64 cross-compiles with Debian's gcc-aarch64-linux-gnu)
dist:
	scripts/dist.sh

## demo: a live simulated run through the real collector (see README)
demo: build
	scripts/demo.sh

clean:
	rm -rf bin
