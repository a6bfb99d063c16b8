package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// binDir holds what the tests build once per test binary (cmd/miles-sim); it outlives every test and is
// removed after them.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "miles-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		_ = os.RemoveAll(dir)
		os.Exit(exitCode)
	}))
}
