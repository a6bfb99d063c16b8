package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

const h0 = 499_000 * 3600.0 // 2026-12-04 16:00 UTC

func writeFile(tb testing.TB, path, content string, appendTo bool) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		tb.Fatal(err)
	}
}

func gpuLines(from, to, lanes int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		for g := range lanes {
			fmt.Fprintf(&b, `{"ts":%d,"node":"n%d","gpu":%d,"util":%d,"mem_mb":%d}`+"\n", int(h0)+i, g/8, g%8, (i+g)%100, 1000+g)
		}
	}
	return b.String()
}

func fixture(t *testing.T, lanes int) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dashboard/meta.json"), `{"schema_version":2,"writer":"otelcol-miles","run_name":"fx","start_ts":`+fmt.Sprintf("%.0f", h0)+`}`, false)
	cat := map[string]any{}
	for g := range lanes {
		cat[fmt.Sprintf("n%d:%d", g/8, g%8)] = map[string]any{"ranks": []int{g}, "engine_addrs": []string{}, "roles": []string{"train"}}
	}
	b, _ := json.Marshal(map[string]any{"version": 2, "lanes": cat})
	writeFile(t, filepath.Join(dir, "dashboard/lane_catalog.json"), string(b), false)
	writeFile(t, filepath.Join(dir, "dashboard/gpu_util/20261204_16.jsonl"), gpuLines(0, 600, lanes), false)
	writeFile(t, filepath.Join(dir, "dashboard/phases/20261204_16.jsonl"),
		fmt.Sprintf(`{"name":"actor_train","t0":%.0f,"t1":%.0f,"node":"n0","rank":0,"role":"train","gpus":[0],"span":"s1"}`+"\n", h0+10, h0+20), false)
	writeFile(t, filepath.Join(dir, "dashboard/metrics/20261204_16.jsonl"),
		fmt.Sprintf(`{"ts":%.0f,"step_key":"rollout/step","step":1,"metrics":{"perf/step_time":100,"perf/wait_time_ratio":0.7}}`+"\n", h0+300), false)
	return dir
}

func serve(t *testing.T, dir string, opts Options) (*httptest.Server, *store.Store, *Server) {
	st, err := store.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = st
	srv := New(opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts, st, srv
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestEnvelopeAndErrors(t *testing.T) {
	ts, _, _ := serve(t, fixture(t, 16), Options{})
	code, m := get(t, ts.URL+"/api/v1/lanes?lanes=rank:0-2")
	if code != 200 || m["status"] != "success" || len(m["data"].(map[string]any)["lanes"].([]any)) != 3 {
		t.Fatalf("%d %v", code, m)
	}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/api/v1/lanes?lanes=rank:x", `bad lane term "rank:x"`, 400},
		{"/api/v1/gpu?t0=0&t1=20000", "exceeds the cap", 400},
		{"/api/v1/gpu?t0=abc", "t0 must be a number", 400},
		{"/api/v1/gpu?points=1", "points must be an integer", 400},
		{"/api/v1/gpu?fields=../x", "bad field", 400},
		{"/api/v1/heatmap?metric=temperature", "heatmap metric", 400},
		{"/api/v1/nope", "no such endpoint", 404},
	} {
		code, m := get(t, ts.URL+tc.path)
		if code != tc.code || m["status"] != "error" || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("%s: %d %v, want %d containing %q", tc.path, code, m, tc.code, tc.want)
		}
	}
}

func TestBubblesAndHeatmapFraming(t *testing.T) {
	ts, _, _ := serve(t, fixture(t, 16), Options{})
	_, m := get(t, ts.URL+"/api/v1/bubbles")
	steps := m["data"].(map[string]any)["steps"].([]any)
	if len(steps) != 1 || steps[0].(map[string]any)["wait_ratio"] != 0.7 {
		t.Fatalf("bubbles %v", m)
	}
	resp, err := http.Get(ts.URL + fmt.Sprintf("/api/v1/heatmap?metric=util&buckets=60&t0=%.0f&t1=%.0f", h0, h0+600))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := binary.LittleEndian.Uint32(b)
	var hdr struct {
		Rows, Buckets int
	}
	if err := json.Unmarshal(b[4:4+n], &hdr); err != nil {
		t.Fatal(err)
	}
	cells := b[4+n:]
	if hdr.Rows != 16 || hdr.Buckets != 60 || len(cells) != 16*60 {
		t.Fatalf("header %+v, %d cells", hdr, len(cells))
	}
	for i, c := range cells {
		if c == 0 {
			t.Fatalf("cell %d empty though every second has a sample", i)
		}
	}
}

// TestTokenAndLoopback: with a token every path (API, assets, WebSocket) needs it; assets never reach outside
// the embedded files.
func TestTokenAndPaths(t *testing.T) {
	assets := fstest.MapFS{"index.html": {Data: []byte("<html>miles</html>")}}
	ts, _, _ := serve(t, fixture(t, 8), Options{Token: "s3cret", Assets: assets})
	for _, p := range []string{"/api/v1/meta", "/api/v1/gpu", "/api/v1/nope"} {
		resp, _ := http.Get(ts.URL + p)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without token: %d", p, resp.StatusCode)
		}
	}
	// The page itself holds no run data: it loads without the token and forwards ?token= to the API.
	page, _ := http.Get(ts.URL + "/")
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Errorf("page without token: %d", page.StatusCode)
	}
	if code, _ := get(t, ts.URL+"/api/v1/meta?token=s3cret"); code != 200 {
		t.Errorf("meta with token: %d", code)
	}
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/meta", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("bearer: %d", resp.StatusCode)
	}
	for _, p := range []string{"/../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/..%2fmeta.json"} {
		resp, err := http.Get(ts.URL + p + "?token=s3cret")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "root:") || strings.Contains(string(b), "schema_version") {
			t.Errorf("%s escaped the assets: %d %q", p, resp.StatusCode, b)
		}
	}
	if _, _, err := websocket.DefaultDialer.Dial(strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/live", nil); err == nil {
		t.Error("websocket without token accepted")
	}
}

func dial(t *testing.T, ts *httptest.Server, origin string) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, _, err := websocket.DefaultDialer.Dial(strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/live", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readType(t *testing.T, c *websocket.Conn, want string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_ = c.SetReadDeadline(deadline)
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m["type"] == want {
			return m
		}
	}
}

// TestLivePushAndStalledClient: a page gets meta on connect and a delta when the files grow; a page that never
// reads is resynced then dropped without delaying the reading one; a foreign origin is refused.
func TestLivePushAndStalledClient(t *testing.T) {
	dir := fixture(t, 16)
	ts, st, srv := serve(t, dir, Options{})
	if _, _, err := websocket.DefaultDialer.Dial(strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/live",
		http.Header{"Origin": []string{"http://evil.example"}}); err == nil {
		t.Fatal("cross-origin websocket accepted")
	}
	good := dial(t, ts, ts.URL)
	readType(t, good, "meta", 5*time.Second)
	if err := good.WriteJSON(map[string]any{"type": "subscribe", "view": "compute", "lanes": "all", "follow_s": 900}); err != nil {
		t.Fatal(err)
	}
	stalled := dial(t, ts, "")
	// A short trailing window at the finest resolution makes its deltas large, so its socket buffers fill fast.
	if err := stalled.WriteJSON(map[string]any{
		"type": "subscribe", "view": "compute", "lanes": "all",
		"follow_s": 60, "points": 4000,
	}); err != nil {
		t.Fatal(err)
	}
	waitSubscribed(t, srv, 2)
	path := filepath.Join(dir, "dashboard/gpu_util/20261204_16.jsonl")
	start := time.Now()
	writeFile(t, path, gpuLines(600, 601, 16), true)
	st.Refresh()
	d := readType(t, good, "delta", 5*time.Second)
	if lat := time.Since(start); lat > 2*time.Second {
		t.Errorf("delta took %s", lat)
	}
	data := d["data"].(map[string]any)
	if data["data_edge"].(float64) != h0+600 {
		t.Errorf("delta edge %v", data["data_edge"])
	}
	// Flood: many more changes than the stalled page can take, while the good page keeps reading; the hub
	// coalesces changes when busy, so what counts is that the good page keeps up with the data edge.
	var mu sync.Mutex
	goodEdge := 0.0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_ = good.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, b, err := good.ReadMessage()
			if err != nil {
				return
			}
			var m struct {
				Type string
				Data struct {
					DataEdge float64 `json:"data_edge"`
				}
			}
			if json.Unmarshal(b, &m) == nil && m.Type == "delta" {
				mu.Lock()
				goodEdge = math.Max(goodEdge, m.Data.DataEdge)
				mu.Unlock()
			}
		}
	}()
	dropped := func() bool {
		return len(srv.hub.clientList()) == 1
	}
	// Keep the files growing until the stalled page has been dropped (its socket buffers absorb a few MB
	// first), at most 30 s.
	floodEnd := time.Now().Add(30 * time.Second)
	i := 601
	for ; !dropped() && time.Now().Before(floodEnd); i++ {
		writeFile(t, path, gpuLines(i, i+1, 16), true)
		st.Refresh()
	}
	wasDropped := dropped()
	final := h0 + float64(i)
	writeFile(t, path, gpuLines(i, i+1, 16), true)
	st.Refresh()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		e := goodEdge
		mu.Unlock()
		if e == final {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reading page is at data edge %.0f, the files at %.0f", e-h0, final-h0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	good.Close()
	<-done
	if !wasDropped {
		t.Fatal("the stalled page was never dropped")
	}
}
