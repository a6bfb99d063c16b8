package dumps

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// testTmp is a folder for what the package's tests and benchmarks share (the benchmark run), removed when
// they end.
var testTmp string

// TestMain fails the package's tests if any leaves a goroutine behind: the reader starts none of its own, and
// the tests that read concurrently or serve HTTP must stop everything they started.
func TestMain(m *testing.M) { e2etest.VerifyMainWithDir(m, "dumps-test-", &testTmp) }

// SharedTmpForTest hands testTmp to the external tests (bench_test.go's benchmark run).
func SharedTmpForTest() string { return testTmp }
