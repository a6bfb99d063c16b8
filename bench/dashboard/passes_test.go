package dashboard

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestWholeRunPassesBesideOtherViews reports (as test log lines, the figures BENCHMARKS.md quotes) how long a
// fresh process takes for the answers that read the whole run (the step index: the Lifecycle page's steps; the
// engine metric catalog: the Metrics page's keys; an sglang series over the whole run: the compare page's), and
// how long another client's /api/v1/meta, asked 2 s into each, waits meanwhile.
func TestWholeRunPassesBesideOtherViews(t *testing.T) {
	dir := runDir(t)
	for _, slow := range []string{"/api/v1/steps", "/api/v1/metrics/keys", "/api/v1/engines/series?metric=sglang:gen_throughput&points=400"} {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New(server.Options{Store: st})
		ts := httptest.NewServer(srv)
		get(t, ts.URL+"/api/v1/meta")
		done := make(chan time.Duration)
		go func() {
			s := time.Now()
			get(t, ts.URL+slow)
			done <- time.Since(s)
		}()
		time.Sleep(2 * time.Second)
		s := time.Now()
		get(t, ts.URL+"/api/v1/meta")
		during := time.Since(s)
		t.Logf("first %-62s %8.1f s; /api/v1/meta asked 2 s into it %8.1f ms", slow, (<-done).Seconds(), float64(during.Microseconds())/1000)
		ts.Close()
		srv.Close()
	}
}
