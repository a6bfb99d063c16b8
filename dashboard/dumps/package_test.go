package dumps

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// testTmp is a folder for what the package's tests and benchmarks share (the benchmark run), removed when
// they end.
var testTmp string

// TestMain fails the package's tests if any leaves a goroutine behind: the reader starts none of its own, and
// the tests that read concurrently or serve HTTP must stop everything they started.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dumps-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testTmp = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// SharedTmpForTest hands testTmp to the external tests (bench_test.go's benchmark run).
func SharedTmpForTest() string { return testTmp }
