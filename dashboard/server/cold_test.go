package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestColdAnswers asks /phases, /fleet and /heatmap of a run no query has read yet, each on a store of its own,
// so every answer takes the whole cold path: the handler, the query, the pin, the hour cache's plan, reads and
// apply, the settle (dashboard/store/README.md, "How a query reaches its data").
func TestColdAnswers(t *testing.T) {
	dir := fixture(t, 8)
	// Four seconds of GPU samples: enough for every answer.
	writeFile(t, filepath.Join(dir, "dashboard/gpu_util/20261204_16.jsonl"), gpuLines(0, 4, 8), false)
	window := fmt.Sprintf("t0=%.0f&t1=%.0f", h0, h0+600)
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/phases?" + window, `"actor_train"`},
		{"/api/v1/fleet?buckets=60&" + window, `"actor_train":[`},
		{"/api/v1/heatmap?metric=util&buckets=60&" + window, `"rows":8`},
	} {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		srv := New(Options{Store: st})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1"+tc.path, http.NoBody))
		srv.Close()
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %.300s, want %s", tc.path, rec.Code, rec.Body.String(), tc.want)
		}
	}
}
