package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (a load worker, a column cache write, a
// follow loop left running).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
