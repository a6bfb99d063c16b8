package server

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// testTmp is a folder for what the package's tests share (the miles-sim binary), removed when they end.
var testTmp string

// TestMain fails the package when a test leaves a goroutine behind: Close must stop the hub's loops and every
// page's writer.
func TestMain(m *testing.M) { e2etest.VerifyMainWithDir(m, "miles-server-test-", &testTmp) }
