// Package testwait holds waits on progress shared by tests and benchmarks that run the dashboard store in their
// own process: each waits on a state, with a deadline, never for a fixed time.
package testwait

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// cacheWriter names the goroutine the dashboard store starts to write a cache file in the background (GPU
// columns or a settled step's facts: dashboard/store gpu_cache.go, saveCached): the goroutine runs the function literal inside saveCached.
var cacheWriter = []byte("dashboard/store.(*Store).saveCached.func")

// CacheWrites waits until no column cache file is being written in this process: every writer the store started
// has renamed its file into place or given up. A query that parses a settled hour starts its writer before it
// returns, so after CacheWrites the next open finds the cache as the writers left it, however loaded the machine.
func CacheWrites(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for Writing() {
		if time.Now().After(deadline) {
			tb.Fatalf("a column cache file is still being written after %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Writing says whether a column cache writer goroutine is running (or about to).
func Writing() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], cacheWriter)
		}
		buf = make([]byte, 2*len(buf))
	}
}
