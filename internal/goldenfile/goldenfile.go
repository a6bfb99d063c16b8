// Package goldenfile compares a test's whole output with a file checked in under testdata/, and rewrites that
// file when asked, so regenerating golden files is one deliberate step that shows up in the diff.
//
// Rewrite with the -update test flag of a package that uses it (go test ./exporters/jsonlexporter -update), or
// with MILES_UPDATE_GOLDEN=1 for a run over several packages (go test ./... rejects a flag that some of its
// packages do not define).
package goldenfile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateEnv is the environment variable that, set to 1, rewrites golden files like -update.
const UpdateEnv = "MILES_UPDATE_GOLDEN"

var update = flag.Bool("update", false, "rewrite golden files from the current output (also "+UpdateEnv+"=1)")

// Updating reports whether golden files are being rewritten instead of compared.
func Updating() bool {
	return *update || os.Getenv(UpdateEnv) == "1"
}

// Assert compares got with the golden file at path (relative to the test's package directory, usually under
// testdata/). While Updating, it writes got there instead, creating its directory. A difference fails the test
// with the first line that differs; Assert reports whether the two were equal.
func Assert(tb testing.TB, path string, got []byte) bool {
	tb.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("rewrote %s", path)
		return true
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update or %s=1 to create it)", err, UpdateEnv)
	}
	if bytes.Equal(want, got) {
		return true
	}
	tb.Errorf("output differs from %s (rerun with -update or %s=1 if the change is intended)\n%s",
		path, UpdateEnv, firstDifference(string(got), string(want)))
	return false
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, gl[i], wl[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(gl), len(wl))
}
