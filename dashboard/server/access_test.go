package server

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gorilla/websocket"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Exposure (docs/operations.md "Exposure"): the Host and Origin a request names, the token on every route,
// paths that never leave the run, answers that never name a server directory.

func do(t *testing.T, u string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, hdr)
	if h := hdr.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wsURL(ts *httptest.Server, query string) string {
	return strings.Replace(ts.URL, "http", "ws", 1) + "/api/v1/live" + query
}

// TestHostAndOriginRebinding: a page of attacker.example rebound to 127.0.0.1 names its own host in Host and
// Origin; both are refused unless the name was allowed, on the API, the page and the WebSocket.
func TestHostAndOriginRebinding(t *testing.T) {
	assets := fstest.MapFS{"index.html": {Data: []byte("<html>miles</html>")}}
	ts, _, _ := serve(t, fixture(t, 8), Options{Assets: assets, AllowedHosts: []string{"Dash.Example."}})
	_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.example:" + port, 403},
		{"attacker.example", 403},
		{"localhost.attacker.example", 403},
		{"127.0.0.1.nip.io:" + port, 403},
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST", 200},
		{"app.localhost:" + port, 200},
		{"[::1]:" + port, 200},
		{"10.1.2.3:" + port, 200}, // an IP literal cannot be a rebound name
		{"dash.example:" + port, 200},
		{"DASH.EXAMPLE", 200},
	} {
		for _, p := range []string{"/api/v1/meta", "/"} {
			code, body := do(t, ts.URL+p, http.Header{"Host": {tc.host}})
			if code != tc.want {
				t.Errorf("Host %s %s: %d %s, want %d", tc.host, p, code, body, tc.want)
			}
			if code == 403 && (strings.Contains(body, "miles") && !strings.Contains(body, "allowed-hosts")) {
				t.Errorf("Host %s %s: refused answer carries the page: %s", tc.host, p, body)
			}
		}
	}
	// The WebSocket: a rebound page's Host and Origin agree, so comparing them proves nothing.
	for _, tc := range []struct {
		host, origin string
		ok           bool
	}{
		{"attacker.example:" + port, "http://attacker.example:" + port, false},
		{"127.0.0.1:" + port, "http://attacker.example:" + port, false},
		{"127.0.0.1:" + port, "null", false},
		{"127.0.0.1:" + port, "file://", false},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port, true},
		{"127.0.0.1:" + port, "http://localhost:" + port, true},
		{"dash.example", "https://dash.example", true},
		{"127.0.0.1:" + port, "", true}, // not a browser page
		// An IP-literal origin is a page loaded from that address: the dashboard's own (the request's Host) or a
		// loopback one. Any other is a foreign page, which the same-origin policy keeps from the HTTP answers and
		// nothing keeps from a WebSocket but this check.
		{"127.0.0.1:" + port, "http://203.0.113.5", false},
		{"127.0.0.1:" + port, "http://203.0.113.5:" + port, false},
		{"localhost:" + port, "http://[2001:db8::5]:" + port, false},
		{"10.1.2.3:" + port, "http://10.1.2.3:" + port, true},
		{"10.1.2.3:" + port, "http://10.1.2.4:" + port, false},
		{"localhost:" + port, "http://[::1]:" + port, true},
	} {
		h := http.Header{"Host": {tc.host}}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		c, resp, err := websocket.DefaultDialer.Dial(wsURL(ts, ""), h)
		if c != nil {
			c.Close()
		}
		if (err == nil) != tc.ok {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Errorf("websocket Host %s Origin %q: err %v (%d), want ok=%v", tc.host, tc.origin, err, code, tc.ok)
		}
	}
}

// routeURL fills a route pattern's wildcards with values that exist in no run.
func routeURL(pattern string) string {
	_, p, _ := strings.Cut(pattern, " ")
	return strings.NewReplacer("{id}", "1", "{idx}", "0").Replace(p)
}

// TestTokenOnEveryRoute: every route the server registers, and the WebSocket, refuse a request without the
// token, with a wrong one (of any length) or a blank one, and accept it as ?token= or as a Bearer header of
// any case.
func TestTokenOnEveryRoute(t *testing.T) {
	const token = "s3cret-token"
	ts, _, srv := serve(t, fixture(t, 8), Options{Token: token})
	if len(srv.routes) < 20 {
		t.Fatalf("only %d routes registered: %v", len(srv.routes), srv.routes)
	}
	refused := []http.Header{
		{},
		{"Authorization": {"Bearer wrong-token!"}},
		{"Authorization": {"Bearer s3cret-tokeN"}},
		{"Authorization": {"Bearer s3cret"}},
		{"Authorization": {"Bearer s3cret-token-and-more"}},
		{"Authorization": {"Bearer "}},
		{"Authorization": {"Basic " + token}},
		{"Authorization": {token}},
	}
	accepted := []http.Header{
		{"Authorization": {"Bearer " + token}},
		{"Authorization": {"bearer " + token}},
		{"Authorization": {"BEARER  " + token}},
	}
	for _, pattern := range append(srv.routes, "GET /api/v1/nope") {
		u := ts.URL + routeURL(pattern)
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		for _, h := range refused {
			if code, body := do(t, u, h); code != 401 || !strings.Contains(body, "unauthorized") {
				t.Errorf("%s with %v: %d %s", pattern, h, code, body)
			}
		}
		for _, q := range []string{"token=", "token=%20", "token=wrong", "token=" + token + "x"} {
			if code, _ := do(t, u+sep+q, nil); code != 401 {
				t.Errorf("%s ?%s: %d", pattern, q, code)
			}
		}
		if strings.HasSuffix(pattern, "/live") {
			continue // a plain GET is no upgrade; the WebSocket is dialed below
		}
		for _, h := range accepted {
			if code, body := do(t, u, h); code == 401 {
				t.Errorf("%s with %v refused: %s", pattern, h, body)
			}
		}
		if code, body := do(t, u+sep+"token="+token, nil); code == 401 {
			t.Errorf("%s ?token refused: %s", pattern, body)
		}
	}
	for _, tc := range []struct {
		query string
		hdr   http.Header
		ok    bool
	}{
		{"", nil, false},
		{"?token=wrong", nil, false},
		{"", http.Header{"Authorization": {"Bearer wrong"}}, false},
		{"?token=" + token, nil, true},
		{"", http.Header{"Authorization": {"Bearer " + token}}, true},
		{"", http.Header{"Authorization": {"bearer " + token}}, true},
	} {
		c, _, err := websocket.DefaultDialer.Dial(wsURL(ts, tc.query), tc.hdr)
		if c != nil {
			c.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("websocket %q %v: err %v, want ok=%v", tc.query, tc.hdr, err, tc.ok)
		}
	}
}

// TestTokenComparison: the comparison hashes both sides (its time does not depend on where they differ or
// on the length sent) and needs the token to have been sent.
func TestTokenComparison(t *testing.T) {
	a := newAccess("abc", nil)
	for _, tc := range []struct {
		target string
		hdr    string
		ok     bool
	}{
		{"/api/v1/meta", "", false},
		{"/api/v1/meta?token=abc", "", true},
		{"/api/v1/meta?token=ab", "", false},
		{"/api/v1/meta?token=abcd", "", false},
		{"/api/v1/meta", "Bearer abc", true},
		{"/api/v1/meta?token=abc", "Bearer nope", false}, // the header wins
		{"/api/v1/meta", "Token abc", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://localhost"+tc.target, http.NoBody)
		if tc.hdr != "" {
			r.Header.Set("Authorization", tc.hdr)
		}
		if got := a.authorized(r); got != tc.ok {
			t.Errorf("%s %q: %v, want %v", tc.target, tc.hdr, got, tc.ok)
		}
	}
	if none := newAccess("", nil); !none.authorized(httptest.NewRequest(http.MethodGet, "/", http.NoBody)) {
		t.Error("no token configured, request refused")
	}
}

// TestTraversalThroughParameters: every parameter that names a step, sample, field, metric or lane answers
// bad_data or not_found for .., its encodings and absolute paths, and never shows a file outside the run.
func TestTraversalThroughParameters(t *testing.T) {
	dir := copyDumpRun(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "root:x:0:0:TOPSECRET\n", false)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Store: st, DumpDir: dir, DumpCacheDir: t.TempDir()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	evil := []string{
		"..", "../..", "%2e%2e", "%2E%2E%2F%2E%2E", "..%2f..%2fetc%2fpasswd", "%2fetc%2fpasswd",
		url.PathEscape(filepath.Join(outside, "secret.txt")), "1%00", "1.pt", "-1", "1e3", "0x1",
		"%252e%252e", "....//....//etc",
	}
	var targets []string
	for _, e := range evil {
		for _, p := range []string{
			"/api/v1/dumps/steps/%s", "/api/v1/dumps/steps/%s/groups", "/api/v1/dumps/steps/%s/samples",
			"/api/v1/dumps/steps/1/samples/%s", "/api/v1/dumps/steps/1/samples/%s/tokens",
			"/api/v1/dumps/steps/%s/samples/0/tokens", "/api/v1/steps/%s/anatomy",
			"/api/v1/gpu?fields=%s", "/api/v1/engines?metric=%s", "/api/v1/metrics/series?keys=%s",
			"/api/v1/lanes?lanes=%s", "/api/v1/dumps/steps/1?eval=%s", "/api/v1/heatmap?metric=%s",
		} {
			targets = append(targets, fmt.Sprintf(p, e))
		}
	}
	for _, p := range targets {
		code, body := do(t, ts.URL+p, nil)
		if strings.Contains(body, "TOPSECRET") || strings.Contains(body, "root:") {
			t.Errorf("%s read outside the run: %d %s", p, code, body)
		}
		if strings.Contains(body, dir) { // the outside path is the client's own, echoed in parameter errors
			t.Errorf("%s names the run directory: %s", p, body)
		}
		if code >= 500 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestLinksOutOfTheRun: links inside the run directory that point out of it are not followed, for streams,
// meta.json, the lane catalog and every dump file; a link that stays inside is.
func TestLinksOutOfTheRun(t *testing.T) {
	dir := copyDumpRun(t)
	outside := t.TempDir()
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Outside: a meta.json with a telling name, a GPU hour and a phases hour, a catalog, a rollout dump.
	writeFile(t, filepath.Join(outside, "meta.json"), `{"schema_version":2,"writer":"otelcol-miles","run_name":"OUTSIDE"}`, false)
	writeFile(t, filepath.Join(outside, "gpu.jsonl"), gpuLines(0, 10, 8), false)
	writeFile(t, filepath.Join(outside, "phases.jsonl"),
		fmt.Sprintf(`{"name":"OUTSIDE","t0":%.0f,"t1":%.0f,"node":"n0","rank":0,"role":"train","gpus":[0],"span":"s1"}`+"\n", h0+1, h0+2), false)
	writeFile(t, filepath.Join(outside, "lane_catalog.json"), `{"version":2,"lanes":{"OUTSIDE:0":{"ranks":[0]}}}`, false)
	src, err := os.ReadFile(filepath.Join(dir, "rollout_data/2.pt"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(outside, "9.pt"), string(src), false)
	if err := os.Remove(filepath.Join(dir, "dashboard/meta.json")); err != nil {
		t.Fatal(err)
	}
	link(filepath.Join(outside, "meta.json"), "dashboard/meta.json")
	link(filepath.Join(outside, "gpu.jsonl"), "dashboard/gpu_util/20261204_16.jsonl")
	link("../../../"+filepath.Base(outside)+"/phases.jsonl", "dashboard/phases/20261204_16.jsonl") // relative
	link(filepath.Join(outside, "phases.jsonl"), "dashboard/phases.jsonl")                         // v1 flat file
	link(filepath.Join(outside, "lane_catalog.json"), "dashboard/lane_catalog.json")
	link(filepath.Join(outside, "9.pt"), "rollout_data/9.pt")
	link(filepath.Join(outside, "9.pt"), "train_data/2_9.pt")
	link(filepath.Join(dir, "rollout_data/2.pt"), "rollout_data/7.pt") // stays inside: followed
	link(filepath.Join(outside, "tok.json"), "tokenizer/other.json")

	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Store: st, DumpDir: dir, DumpCacheDir: t.TempDir()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	for _, p := range []string{
		"/api/v1/meta", "/api/v1/lanes", fmt.Sprintf("/api/v1/phases?t0=%.0f&t1=%.0f", h0, h0+3600),
		fmt.Sprintf("/api/v1/gpu?t0=%.0f&t1=%.0f", h0, h0+3600), "/api/v1/dumps/steps",
	} {
		code, body := do(t, ts.URL+p, nil)
		if code != 200 || strings.Contains(body, "OUTSIDE") || strings.Contains(body, `"n0:`) {
			t.Errorf("%s followed a link out of the run: %d %s", p, code, body)
		}
		if strings.Contains(body, outside) || strings.Contains(body, dir) {
			t.Errorf("%s names a server directory: %s", p, body)
		}
	}
	_, steps := get(t, ts.URL+"/api/v1/dumps/steps")
	ids := map[float64]bool{}
	for _, s := range steps["data"].(map[string]any)["steps"].([]any) {
		ids[s.(map[string]any)["id"].(float64)] = true
	}
	if ids[9] || !ids[7] || !ids[2] {
		t.Errorf("dump steps %v: want 7 (link inside) and 2, not 9 (link out)", ids)
	}
	if code, body := do(t, ts.URL+"/api/v1/dumps/steps/9", nil); code != 404 {
		t.Errorf("step 9 behind a link out: %d %s", code, body)
	}
	_, step2 := get(t, ts.URL+"/api/v1/dumps/steps/2")
	if fmt.Sprint(step2["data"]) == "" || strings.Contains(fmt.Sprint(step2), "2_9") {
		t.Errorf("step 2 read the train shard behind a link out: %v", step2)
	}
}

// TestAnswersNameNoServerPath: a notice about a damaged file, and an error about one, name it relative to the
// run.
func TestAnswersNameNoServerPath(t *testing.T) {
	dir := fixture(t, 8)
	writeFile(t, filepath.Join(dir, "dashboard/lane_catalog.json"), `{"version":2,"lanes":{"n0:0":[[[`, false)
	ts, _, _ := serve(t, dir, Options{})
	code, body := do(t, ts.URL+"/api/v1/meta", nil)
	if code != 200 || !strings.Contains(body, "dashboard/lane_catalog.json") {
		t.Fatalf("meta: %d %s (want a notice naming dashboard/lane_catalog.json)", code, body)
	}
	if strings.Contains(body, dir) {
		t.Errorf("meta names the run directory: %s", body)
	}
	c, _, err := websocket.DefaultDialer.Dial(wsURL(ts, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, msg, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg), `"meta"`) || strings.Contains(string(msg), dir) {
		t.Errorf("live meta: %s", msg)
	}
	a := newAccess("", nil)
	a.hide(dir, "")
	a.hide("/var/cache/m", "<cache>")
	for in, want := range map[string]string{
		dir + "/dashboard/x.jsonl: bad":     "dashboard/x.jsonl: bad",
		"open " + dir + ": no":              "open .: no",
		"/var/cache/m/columns/1.col: short": "<cache>/columns/1.col: short",
		"/api/v1/nope":                      "/api/v1/nope",
	} {
		if got := a.redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
