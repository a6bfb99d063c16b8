package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// phaseJSON is one OTLP/JSON request holding one closed phase span of trace id i.
func phaseJSON(i int) []byte {
	now := time.Now().UnixNano()
	b, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{map[string]any{"key": sc.HostName, "value": map[string]any{"stringValue": "n1"}}}},
		"scopeSpans": []any{map[string]any{"spans": []any{map[string]any{
			"traceId": fmt.Sprintf("%032x", i), "spanId": fmt.Sprintf("%016x", i), "name": "actor_train",
			"startTimeUnixNano": strconv.FormatInt(now-2e9, 10), "endTimeUnixNano": strconv.FormatInt(now-1e9, 10),
			"attributes": []any{
				map[string]any{"key": sc.SpanType, "value": map[string]any{"stringValue": sc.SpanTypePhase}},
				map[string]any{"key": sc.Rank, "value": map[string]any{"intValue": "0"}},
				map[string]any{"key": sc.Role, "value": map[string]any{"stringValue": "train"}},
			},
		}}}},
	}}})
	return b
}

// TestOTLPHTTPAnswersE2E: what an OTLP/HTTP client sees from the stock receiver for every kind of body we
// know of that it refuses, as docs/reliability.md documents: undecodable compressed bodies are 400, except
// under a Content-Type that is neither protobuf nor JSON, where the stock receiver cannot encode its error
// and answers 500 (not retryable: a client drops the request, which is malformed anyway); an unknown
// Content-Type is 415. None of them changes what the collector does next: it stays healthy and writes the
// good request sent after them.
func TestOTLPHTTPAnswersE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	post := func(ct, enc string, body []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+c.HTTPAddr+"/v1/traces", bytes.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	junk := []byte("not compressed at all")
	for _, tc := range []struct {
		ct, enc string
		want    int
	}{
		{"application/json", "gzip", 400},
		{"application/json", "zstd", 400},
		{"application/json", "deflate", 400},
		{"application/json", "snappy", 400},
		{"application/json", "br", 400},
		{"application/x-protobuf", "gzip", 400},
		{"application/x-protobuf", "zstd", 400},
		{"application/x-protobuf", "snappy", 400},
		{"", "gzip", 400},
		{"text/plain", "gzip", 500},
		{"text/plain", "deflate", 500},
		{"text/plain", "snappy", 500},
		{"text/plain", "br", 500},
		{"text/plain", "zstd", 415},
		{"text/plain", "", 415},
	} {
		if code, msg := post(tc.ct, tc.enc, junk); code != tc.want {
			t.Errorf("Content-Type %q, Content-Encoding %q: %d %q, documented %d", tc.ct, tc.enc, code, msg, tc.want)
		}
		if code, _ := post("application/json", "", phaseJSON(1)); code != 200 {
			t.Fatalf("a good request after Content-Type %q, Content-Encoding %q: %d", tc.ct, tc.enc, code)
		}
	}
	resp, err := http.Get("http://" + c.HealthAddr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health after the refused bodies: %v %v", resp, err)
	}
	resp.Body.Close()
	e2etest.Eventually(t, 60*time.Second, "the good requests written", func() bool {
		return len(e2etest.Records(t, runDir, sc.StreamPhases)) >= 15
	})
}
