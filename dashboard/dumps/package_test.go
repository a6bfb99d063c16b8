package dumps

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leaves a goroutine behind: the reader starts none of its own, and
// the tests that read concurrently or serve HTTP must stop everything they started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
