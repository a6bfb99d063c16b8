package e2e

import (
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// binDir holds what the tests build once per test binary (cmd/miles-sim); it outlives every test and is
// removed after them.
var binDir string

func TestMain(m *testing.M) { e2etest.VerifyMainWithDir(m, "miles-e2e-bin", &binDir) }
