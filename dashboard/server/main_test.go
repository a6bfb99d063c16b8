package server

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// testTmp is a folder for what the package's tests share (the miles-sim binary), removed when they end.
var testTmp string

// TestMain fails the package when a test leaves a goroutine behind: Close must stop the hub's loops and every
// page's writer.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "miles-server-test-")
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
