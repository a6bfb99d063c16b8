package server

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: Close must stop the hub's loops and every
// page's writer.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
